package chattemplate

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ardanlabs/jinja"
)

// ErrRunaway marks a render that a template's own computation took past a
// bound (steps, macro depth, the size of what it builds or the time it
// takes): the template's fault, not the request's.
var ErrRunaway = errors.New("chattemplate: the template ran away")

const (
	// DefaultMaxSteps bounds loop iterations and macro calls in one render; real
	// templates take a few per message and tool, some a few per pair of
	// messages. The render's time bound usually ends a long one first.
	DefaultMaxSteps = 10_000_000
	// maxMacroDepth bounds macro nesting: recursive macros (gpt-oss renders
	// JSON schemas so) nest as deep as the request's JSON, itself at most
	// MaxDepth.
	maxMacroDepth = 256
	// maxValueDepth bounds how deep a value the template builds may nest
	// (request JSON nests at most MaxDepth).
	maxValueDepth = 512
)

// meter is one render's count, read and written by the hooks that
// instrument places in the template (on the render's goroutine) and
// stopped by Render (on the caller's) when it gives the render up.
type meter struct {
	steps, depth int
	// work is the bytes the render has printed or counted as literal
	// text, macro bodies and captured blocks included; bound is its limit
	// and that of any one value.
	work, bound int
	maxSteps    int
	stopped     atomic.Bool
	// known holds the sizes of the request's lists and dicts, measured
	// once: they never change (mutating), so a filter over messages in a
	// loop costs no walk of them.
	known map[any]int
	// err is the first bound crossed: the engine may reword a hook's
	// error, so Render reports this one.
	err error
}

func newMeter(maxOutput, maxSteps int) *meter {
	// Macro output is counted when the macro writes it and again when the
	// caller prints it, so the bound on work leaves room above MaxOutput;
	// Render still checks the prompt against MaxOutput.
	return &meter{bound: 4 * maxOutput, maxSteps: maxSteps}
}

// step counts one loop iteration or macro call with n bytes of literal
// text.
func (m *meter) step(n int64) error {
	if m.stopped.Load() {
		return m.fail("the render was given up")
	}
	m.steps++
	if m.steps > m.maxSteps {
		return m.fail("over %d loop iterations and macro calls", m.maxSteps)
	}
	return m.add(int(max(n, 0)))
}

func (m *meter) add(n int) error {
	m.work += n
	if m.work > m.bound {
		return m.fail("the template produced over %d bytes", m.bound)
	}
	return nil
}

func (m *meter) fail(format string, args ...any) error {
	err := fmt.Errorf("%w: "+format, append([]any{ErrRunaway}, args...)...)
	if m.err == nil {
		m.err = err
	}
	return err
}

// hooks returns the callables instrument's calls name.
func (m *meter) hooks() map[string]jinja.Value {
	none := jinja.None()
	hooks := map[string]jinja.Value{
		hookStep: jinja.NewCallable(hookStep, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			return none, m.step(intArg(args))
		}),
		hookEnter: jinja.NewCallable(hookEnter, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			m.depth++
			if m.depth > maxMacroDepth {
				return none, m.fail("macros nested over %d deep", maxMacroDepth)
			}
			for _, a := range args[min(1, len(args)):] {
				if err := m.measure(a); err != nil {
					return none, err
				}
			}
			return none, m.step(intArg(args))
		}),
		hookText: jinja.NewCallable(hookText, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			return none, m.add(int(max(intArg(args), 0)))
		}),
		hookLeave: jinja.NewCallable(hookLeave, func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
			m.depth--
			return none, nil
		}),
		hookOut: jinja.NewCallable(hookOut, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if len(args) != 1 {
				return jinja.Undefined(), fmt.Errorf("expected one expression, got %d", len(args))
			}
			n, err := m.size(args[0])
			if err != nil {
				return jinja.Undefined(), err
			}
			return args[0], m.add(n)
		}),
		// inferd_val(value) or, for `set obj.attr`, inferd_val(value, obj).
		hookVal: jinja.NewCallable(hookVal, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			switch len(args) {
			case 1:
				return args[0], m.measure(args[0])
			case 2:
				if _, ok := m.known[identity(args[1])]; ok {
					return jinja.Undefined(), errors.New("set: request data cannot be assigned to (only a namespace can)")
				}
				return args[0], m.within(args[1], args[0])
			}
			return jinja.Undefined(), fmt.Errorf("expected one expression, got %d", len(args))
		}),
	}
	for name, fn := range map[string]func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error){
		hookMul: m.mul, hookAdd: m.plus, hookCat: m.cat, hookGuard: m.guard,
		hookPrefix + "replace": m.filterReplace, hookPrefix + "indent": m.filterIndent, hookPrefix + "join": m.filterJoin,
		hookPrefix + "m_replace": m.methodReplace, hookPrefix + "m_format": m.methodFormat,
		hookPrefix + "m_append": mutating("append"), hookPrefix + "m_insert": mutating("insert"),
		hookPrefix + "m_update": mutating("update"), hookPrefix + "m_pop": mutating("pop"),
	} {
		hooks[name] = jinja.NewCallable(name, fn)
	}
	return hooks
}

func intArg(args []jinja.Value) int64 {
	if len(args) > 0 && args[0].IsInt() {
		return args[0].AsInt()
	}
	return 0
}

func (m *meter) measure(v jinja.Value) error {
	_, err := m.size(v)
	return err
}

// size is about how many bytes v prints as, or ErrRunaway once that passes
// the bound: the walk stops there, so a value that holds itself, or shares
// parts that print many times over, costs at most the bound to measure.
func (m *meter) size(v jinja.Value) (int, error) {
	n, _, err := m.walk(v, jinja.Undefined())
	return n, err
}

// within fails when v holds container (a list or dict), which would then
// hold itself, or is over the bound.
func (m *meter) within(container, v jinja.Value) error {
	_, found, err := m.walk(v, container)
	if err == nil && found {
		err = m.fail("a list or dict made to hold itself")
	}
	return err
}

// walk measures v and tells whether it holds target (the same list or
// dict, not an equal one).
func (m *meter) walk(v, target jinja.Value) (int, bool, error) {
	n, items, found := 0, 0, false
	same := func(v jinja.Value) bool {
		switch {
		case v.IsList() && target.IsList():
			return v.AsList() == target.AsList()
		case v.IsDict() && target.IsDict():
			return v.AsDict() == target.AsDict()
		}
		return false
	}
	var walk func(v jinja.Value, depth int) bool
	walk = func(v jinja.Value, depth int) bool {
		// A long walk also sees the render given up.
		if items++; depth > maxValueDepth || (items%4096 == 0 && m.stopped.Load()) {
			return false
		}
		found = found || same(v)
		if k, ok := m.known[identity(v)]; ok {
			n += k
			return n <= m.bound
		}
		switch {
		case v.IsString():
			n += len(v.AsString())
		case v.IsList():
			n += 2
			for _, item := range v.AsList().Items {
				if n += 2; n > m.bound || !walk(item, depth+1) {
					return false
				}
			}
		case v.IsDict():
			n += 2
			d := v.AsDict()
			for _, k := range d.Keys {
				item, _ := d.Get(k)
				if n += len(k) + 6; n > m.bound || !walk(item, depth+1) {
					return false
				}
			}
		default:
			n += 8
		}
		return n <= m.bound
	}
	if !walk(v, 0) {
		return n, found, m.fail("a value over %d bytes or nested over %d deep", m.bound, maxValueDepth)
	}
	return n, found, nil
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

// remember measures request data and keeps the size of each list and dict
// in it.
func (m *meter) remember(v jinja.Value) error {
	if m.known == nil {
		m.known = map[any]int{}
	}
	var walk func(v jinja.Value, depth int) (int, error)
	walk = func(v jinja.Value, depth int) (int, error) {
		if depth > maxValueDepth {
			return 0, m.fail("request data nested over %d deep", maxValueDepth)
		}
		n := 0
		switch {
		case v.IsString():
			return len(v.AsString()), nil
		case v.IsList():
			n = 2
			for _, item := range v.AsList().Items {
				k, err := walk(item, depth+1)
				if err != nil {
					return 0, err
				}
				n += k + 2
			}
		case v.IsDict():
			n = 2
			d := v.AsDict()
			for _, key := range d.Keys {
				item, _ := d.Get(key)
				k, err := walk(item, depth+1)
				if err != nil {
					return 0, err
				}
				n += k + len(key) + 6
			}
		default:
			return 8, nil
		}
		m.known[identity(v)] = n
		return n, nil
	}
	_, err := walk(v, 0)
	return err
}
