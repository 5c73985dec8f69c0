package chattemplate

import (
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// mul is the engine's `*` (mulValues in github.com/ardanlabs/jinja
// eval.go) with the repeated string measured before it is made.
func (m *meter) mul(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 {
		return jinja.Undefined(), fmt.Errorf("%s takes two operands", hookMul)
	}
	a, b := args[0], args[1]
	if a.IsString() && b.IsInt() {
		n := b.AsInt()
		if n < 0 {
			return jinja.Undefined(), fmt.Errorf("negative repeat count %d", n)
		}
		if l := int64(len(a.AsString())); l > 0 && n > int64(m.bound)/l {
			return jinja.Undefined(), m.fail("a string of %d bytes repeated %d times is over %d bytes", l, n, m.bound)
		}
		return jinja.NewString(strings.Repeat(a.AsString(), int(n))), nil
	}
	if a.IsFloat() || b.IsFloat() {
		return jinja.NewFloat(engineFloat(a) * engineFloat(b)), nil
	}
	return jinja.NewInt(engineInt(a) * engineInt(b)), nil
}

// engineInt and engineFloat are the engine's toInt64 and toFloat64
// (github.com/ardanlabs/jinja builtins.go).
func engineInt(v jinja.Value) int64 {
	switch {
	case v.IsInt():
		return v.AsInt()
	case v.IsFloat():
		return int64(v.AsFloat())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
	case v.IsString():
		var n int64
		_, _ = fmt.Sscanf(v.AsString(), "%d", &n)
		return n
	}
	return 0
}

func engineFloat(v jinja.Value) float64 {
	switch {
	case v.IsFloat():
		return v.AsFloat()
	case v.IsInt():
		return float64(v.AsInt())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
	case v.IsString():
		var f float64
		_, _ = fmt.Sscanf(v.AsString(), "%f", &f)
		return f
	}
	return 0
}

// printed is the engine's printValue (github.com/ardanlabs/jinja
// builtins.go): how a value reads when concatenated, joined or replaced.
func printed(v jinja.Value) string {
	switch {
	case v.IsUndefined(), v.IsNone(), v.IsCallable():
		return ""
	case v.IsBool():
		if v.AsBool() {
			return "True"
		}
		return "False"
	case v.IsInt():
		return fmt.Sprintf("%d", v.AsInt())
	case v.IsFloat():
		return fmt.Sprintf("%g", v.AsFloat())
	case v.IsString():
		return v.AsString()
	}
	return v.String()
}

// sizes measures each value and fails when together they pass the bound.
func (m *meter) sizes(what string, vs ...jinja.Value) error {
	total := 0
	for _, v := range vs {
		n, err := m.size(v)
		if err != nil {
			return err
		}
		if total += n; total > m.bound {
			return m.fail("%s of over %d bytes", what, m.bound)
		}
	}
	return nil
}

// cat is the engine's `~`.
func (m *meter) cat(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 {
		return jinja.Undefined(), fmt.Errorf("%s takes two operands", hookCat)
	}
	if err := m.sizes("a concatenation", args...); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(printed(args[0]) + printed(args[1])), nil
}

// plus is the engine's `+` (addValues).
func (m *meter) plus(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 {
		return jinja.Undefined(), fmt.Errorf("%s takes two operands", hookAdd)
	}
	a, b := args[0], args[1]
	switch {
	case a.IsString() || b.IsString():
		if err := m.sizes("a concatenation", a, b); err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(printed(a) + printed(b)), nil
	case a.IsList() && b.IsList():
		if err := m.sizes("a list", a, b); err != nil {
			return jinja.Undefined(), err
		}
		items := make([]jinja.Value, 0, a.AsList().Len()+b.AsList().Len())
		items = append(append(items, a.AsList().Items...), b.AsList().Items...)
		sum := jinja.NewList(items)
		// `ns.l = ns.l + [x]` in a loop must not walk ns.l each time.
		na, okA := m.measured[a.AsList()]
		nb, okB := m.measured[b.AsList()]
		if okA && okB {
			m.measured[sum.AsList()] = na + nb - 2
		}
		return sum, nil
	case a.IsFloat() || b.IsFloat():
		return jinja.NewFloat(engineFloat(a) + engineFloat(b)), nil
	}
	return jinja.NewInt(engineInt(a) + engineInt(b)), nil
}

// guard passes a filter's input on once measured, so no filter prints a
// value that holds itself or is over the bound.
func (m *meter) guard(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), nil
	}
	return args[0], m.sizes("a filter's input", args[0])
}

// replaced checks the size of strings.Replace(s, old, new, count) before
// it is made.
func (m *meter) replaced(s, old, new string, count int) error {
	n := strings.Count(s, old)
	if count >= 0 {
		n = min(n, count)
	}
	if grow := len(new) - len(old); grow > 0 && len(s)+n*grow > m.bound {
		return m.fail("a replace of over %d bytes", m.bound)
	}
	return nil
}

// filterReplace is the engine's replace filter.
func (m *meter) filterReplace(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) < 3 {
		return jinja.NewString(""), fmt.Errorf("replace: expected at least 3 arguments")
	}
	s, old, new := printed(args[0]), printed(args[1]), printed(args[2])
	count := -1
	if len(args) > 3 {
		count = int(engineInt(args[3]))
	}
	if c, ok := kwargs["count"]; ok {
		count = int(engineInt(c))
	}
	if err := m.replaced(s, old, new, count); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(strings.Replace(s, old, new, count)), nil
}

// methodReplace is the engine's str.replace.
func (m *meter) methodReplace(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 || !args[0].IsString() {
		return jinja.Undefined(), fmt.Errorf("replace is a method of strings")
	}
	s := args[0].AsString()
	if len(args) < 3 {
		return jinja.NewString(s), nil
	}
	old, new := printed(args[1]), printed(args[2])
	count := -1
	if len(args) > 3 {
		count = int(engineInt(args[3]))
	}
	if err := m.replaced(s, old, new, count); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(strings.Replace(s, old, new, count)), nil
}

// methodFormat is the engine's str.format: each argument replaces {i}
// everywhere and the first {}.
func (m *meter) methodFormat(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 || !args[0].IsString() {
		return jinja.Undefined(), fmt.Errorf("format is a method of strings")
	}
	result := args[0].AsString()
	for i, arg := range args[1:] {
		placeholder, text := fmt.Sprintf("{%d}", i), printed(arg)
		if err := m.replaced(result, placeholder, text, -1); err != nil {
			return jinja.Undefined(), err
		}
		result = strings.ReplaceAll(result, placeholder, text)
		if err := m.replaced(result, "{}", text, 1); err != nil {
			return jinja.Undefined(), err
		}
		result = strings.Replace(result, "{}", text, 1)
	}
	return jinja.NewString(result), nil
}

// filterIndent is the engine's indent filter.
func (m *meter) filterIndent(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	s := printed(args[0])
	width := 4
	if len(args) > 1 {
		width = int(engineInt(args[1]))
	}
	if w, ok := kwargs["width"]; ok {
		width = int(engineInt(w))
	}
	first := false
	if len(args) > 2 {
		first = args[2].IsTruthy()
	}
	if f, ok := kwargs["first"]; ok {
		first = f.IsTruthy()
	}
	if width < 0 {
		return jinja.Undefined(), fmt.Errorf("indent: negative width %d", width)
	}
	lines := strings.Split(s, "\n")
	if width > m.bound || len(s)+len(lines)*width > m.bound {
		return jinja.Undefined(), m.fail("an indent of over %d bytes", m.bound)
	}
	pad := strings.Repeat(" ", width)
	for i, line := range lines {
		if (i > 0 || first) && line != "" {
			lines[i] = pad + line
		}
	}
	return jinja.NewString(strings.Join(lines, "\n")), nil
}

// filterJoin is the engine's join filter.
func (m *meter) filterJoin(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	if !args[0].IsList() {
		return jinja.NewString(printed(args[0])), nil
	}
	sep := ""
	if len(args) > 1 {
		sep = printed(args[1])
	}
	if s, ok := kwargs["d"]; ok {
		sep = printed(s)
	}
	attr := ""
	if a, ok := kwargs["attribute"]; ok {
		attr = printed(a)
	}
	list := args[0].AsList()
	if err := m.sizes("a join", args[0]); err != nil {
		return jinja.Undefined(), err
	}
	if len(sep) > 0 && list.Len()*len(sep) > m.bound {
		return jinja.Undefined(), m.fail("a join of over %d bytes", m.bound)
	}
	parts := make([]string, list.Len())
	for i, item := range list.Items {
		if attr != "" && item.IsDict() {
			if v, ok := item.AsDict().Get(attr); ok {
				item = v
			}
		}
		parts[i] = printed(item)
	}
	return jinja.NewString(strings.Join(parts, sep)), nil
}

// mutating is list.append, list.insert, list.pop, dict.update and
// dict.pop: refused, as transformers renders templates in jinja2's
// ImmutableSandboxedEnvironment, whose is_safe_attribute refuses what
// modifies_known_mutable names (pallets/jinja src/jinja2/sandbox.py). So a
// list or dict, request data included, never changes once made (but a
// namespace, through set), and never comes to hold itself.
func mutating(name string) func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
	return func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		kind := "object"
		if len(args) > 0 && args[0].IsList() {
			kind = "list"
		} else if len(args) > 0 && args[0].IsDict() {
			kind = "dict"
		}
		return jinja.Undefined(), fmt.Errorf("access to attribute '%s' of '%s' object is unsafe (templates render in an immutable sandbox, as transformers renders them)", name, kind)
	}
}
