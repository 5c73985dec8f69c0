package tritonjson

// A walk over a value's contents, for readers that convert large arrays
// (an infer request's tensor "data") without an iterator's closure per
// element or a copy of the values.

// Pos is v's position in its document: the values, and the names of object
// members, are numbered in document order from 0 for the root, a container
// before what it contains. With End it tells which values are nested in
// which. The zero Value's position is 0.
func (v Value) Pos() int { return int(v.i) }

// End is the position just past v and everything nested in it: the values
// nested in a container v are those whose Pos lies strictly between
// v.Pos() and v.End(). A scalar's End is its Pos plus one; the zero
// Value's is 0.
func (v Value) End() int {
	if v.d == nil {
		return 0
	}
	return int(v.d.next(v.i))
}

// ArrayWalk walks, in document order, the values nested in an array at any
// depth of nested arrays: each array comes before its elements, and any
// other value, an object included, is one step (an object's members are
// not visited).
type ArrayWalk struct {
	d         *Document
	next, end uint32
}

// ArrayWalk starts the walk of what array v holds; it is empty when v is
// not an array.
func (v Value) ArrayWalk() ArrayWalk {
	if v.Kind() != KindArray {
		return ArrayWalk{}
	}
	return ArrayWalk{d: v.d, next: v.i + 1, end: v.node().n}
}

// Next returns the walk's next value, or false once the walk is over.
func (w *ArrayWalk) Next() (Value, bool) {
	if w.next >= w.end {
		return Value{}, false
	}
	v := Value{w.d, w.next}
	if nd := &w.d.nodes[w.next]; nd.kind == KindObject {
		w.next = nd.n
	} else {
		w.next++
	}
	return v, true
}
