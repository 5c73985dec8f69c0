package tritonjson

import (
	"bytes"
	"hash/maphash"
	"math/bits"
)

// MemberIndex finds the members of one object by name in constant time:
// for every name, the first member of that name, as Find returns it. A
// reader that looks up each member of a client's object again (Triton
// lists a parameters object's names, then finds each one) builds it once,
// so that the lookups cost time linear in the object rather than
// quadratic.
//
// Small objects are not indexed: Find over a few members costs less than
// building a table, and allocates nothing. An index is valid as long as
// its document is.
type MemberIndex struct {
	obj  Value
	seed maphash.Seed
	// slots is an open-addressing table (linear probing, at most half
	// full) of the positions of member names; 0, the root's position, is
	// an empty slot. nil: obj is small, or not an object.
	slots []uint32
	names int // distinct names in slots
}

// smallObject is the most members an index leaves to Find.
const smallObject = 8

// IndexMembers indexes the members of object v by name. For anything but
// an object the index finds nothing, as Find does.
func (v Value) IndexMembers() MemberIndex {
	x := MemberIndex{obj: v}
	if v.Kind() != KindObject || v.Len() <= smallObject {
		return x
	}
	// A power of two at least twice the member count: probes stay short
	// and the table costs 8 bytes a member (the members' nodes cost 32).
	x.slots = make([]uint32, 1<<bits.Len(uint(2*v.Len()-1)))
	x.seed = maphash.MakeSeed() // random per index, so names cannot be chosen to collide
	mask := uint64(len(x.slots) - 1)
	d := v.d
	end := v.node().n
	for i := v.i + 1; i < end; i = d.next(i + 1) {
		name := d.str(&d.nodes[i])
		for h := maphash.Bytes(x.seed, name) & mask; ; h = (h + 1) & mask {
			s := x.slots[h]
			if s == 0 {
				x.slots[h] = i
				x.names++
				break
			}
			if bytes.Equal(d.str(&d.nodes[s]), name) {
				break // the earlier member of this name is the one found
			}
		}
	}
	return x
}

// Names is how many distinct names the object's members have, at most:
// exact for an indexed object, its member count for a small one. A reader
// that keeps one entry per name sizes its table with it.
func (x MemberIndex) Names() int {
	if x.slots == nil {
		return x.obj.Len()
	}
	return x.names
}

// Find returns the first member named name, exactly as the object's own
// Find does.
func (x MemberIndex) Find(name string) (Value, bool) {
	if x.slots == nil {
		return x.obj.Find(name)
	}
	d := x.obj.d
	mask := uint64(len(x.slots) - 1)
	for h := maphash.String(x.seed, name) & mask; ; h = (h + 1) & mask {
		s := x.slots[h]
		if s == 0 {
			return Value{}, false
		}
		if string(d.str(&d.nodes[s])) == name {
			return Value{d, s + 1}, true
		}
	}
}
