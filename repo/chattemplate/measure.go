package chattemplate

import (
	"sort"

	"github.com/ardanlabs/jinja"
)

// size is about how many bytes v prints as, or ErrRunaway once that passes
// the bound: the walk stops there, so a value that holds itself, or shares
// parts that print many times over, costs at most the bound to measure.
func (m *meter) size(v jinja.Value) (int, error) {
	n, _, err := m.walk(v, jinja.Undefined())
	return n, err
}

func (m *meter) measure(v jinja.Value) error {
	_, err := m.size(v)
	return err
}

// within fails when v holds container (a namespace), which would then hold
// itself, or is over the bound.
func (m *meter) within(container, v jinja.Value) error {
	_, found, err := m.walk(v, container)
	if err == nil && found {
		err = m.fail("a namespace made to hold itself")
	}
	return err
}

// walk measures v and tells whether it holds target (the same list or
// dict, not an equal one). Lists and dicts that hold no namespace keep
// their size in m.sizes, and a walk that meets one again takes it from
// there: a namespace holds none of them, so the target is never inside.
func (m *meter) walk(v, target jinja.Value) (int, bool, error) {
	total, items, found := 0, 0, false
	tp := identity(target)
	// rec returns v's size and whether it holds a namespace; false once
	// the walk must stop.
	var rec func(v jinja.Value, depth int) (int, bool, bool)
	rec = func(v jinja.Value, depth int) (int, bool, bool) {
		// A long walk also sees the render given up.
		if items++; depth > maxValueDepth || (items%4096 == 0 && m.stopped.Load()) {
			return 0, false, false
		}
		p := identity(v)
		if p == nil {
			n := 8
			if v.IsString() {
				n = len(v.AsString())
			}
			total += n
			return n, false, total <= m.bound
		}
		found = found || (tp != nil && p == tp)
		if n, ok := m.measured[p]; ok {
			total += n
			return n, false, total <= m.bound
		}
		size, holdsNS := 2, v.IsDict() && m.namespaces[v.AsDict()]
		total += 2
		child := func(item jinja.Value, overhead int) bool {
			total += overhead
			n, ns, ok := rec(item, depth+1)
			size, holdsNS = size+n+overhead, holdsNS || ns
			return ok && total <= m.bound
		}
		if v.IsList() {
			for _, item := range v.AsList().Items {
				if !child(item, 2) {
					return 0, false, false
				}
			}
		} else {
			d := v.AsDict()
			for _, k := range d.Keys {
				item, _ := d.Get(k)
				if !child(item, len(k)+6) {
					return 0, false, false
				}
			}
		}
		if !holdsNS {
			m.measured[p] = size
		}
		return size, holdsNS, true
	}
	if _, _, ok := rec(v, 0); !ok {
		return total, found, m.fail("a value over %d bytes or nested over %d deep", m.bound, maxValueDepth)
	}
	return total, found, nil
}

// identity is a list's or dict's pointer, nil for other values.
func identity(v jinja.Value) any {
	switch {
	case v.IsList():
		return v.AsList()
	case v.IsDict():
		return v.AsDict()
	}
	return nil
}

// namespace is the engine's namespace() (builtinNamespace in
// github.com/ardanlabs/jinja builtins.go), keeping the dict it makes as a
// namespace, with its keys in sorted order rather than Go's map order.
func (m *meter) namespace(_ []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	keys := make([]string, 0, len(kwargs))
	for k := range kwargs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	v := jinja.NewDict()
	for _, k := range keys {
		if err := m.measure(kwargs[k]); err != nil {
			return jinja.Undefined(), err
		}
		v.AsDict().Set(k, kwargs[k])
	}
	m.namespaces[v.AsDict()] = true
	return v, nil
}
