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
	// measured holds the size of each list and dict that holds no
	// namespace: nothing changes those once made (mutating), so a filter
	// over messages in a loop walks them once a render, not each time.
	measured map[any]int
	// namespaces are the dicts namespace() made: the only ones `set
	// obj.attr` may change, as in jinja2.
	namespaces map[*jinja.Dict]bool
	// err is the first bound crossed: the engine may reword a hook's
	// error, so Render reports this one.
	err error
}

func newMeter(maxOutput, maxSteps int) *meter {
	// Macro output is counted when the macro writes it and again when the
	// caller prints it, so the bound on work leaves room above MaxOutput;
	// Render still checks the prompt against MaxOutput.
	return &meter{bound: 4 * maxOutput, maxSteps: maxSteps, measured: map[any]int{}, namespaces: map[*jinja.Dict]bool{}}
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
				if !args[1].IsDict() || !m.namespaces[args[1].AsDict()] {
					return jinja.Undefined(), errors.New("cannot assign attribute on non-namespace object")
				}
				return args[0], m.within(args[1], args[0])
			}
			return jinja.Undefined(), fmt.Errorf("expected one expression, got %d", len(args))
		}),
	}
	for name, fn := range map[string]func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error){
		"namespace": m.namespace,
		hookMul:     m.mul, hookAdd: m.plus, hookCat: m.cat, hookGuard: m.guard,
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
