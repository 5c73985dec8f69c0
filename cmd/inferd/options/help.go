package options

import (
	"fmt"
	"io"
	"strings"
)

// Usage prints every option in Triton's help groups: "--name <label>" and,
// indented below, what it does, its default and whether it takes effect
// here (planned, no-op, or an inferd extension).
func Usage(w io.Writer, prog string) {
	fmt.Fprintf(w, "Usage: %s [options]\n\n", prog)
	name := prog
	if prog != "inferd" {
		name += " (inferd)"
	}
	fmt.Fprintf(w, "%s: a Triton-compatible inference server for ONNX models. It takes every\n", name)
	fmt.Fprintf(w, "tritonserver option, as --name=value or --name value; booleans are true/false, on/off or 1/0.\n")
	fmt.Fprintf(w, "[planned: X] options are checked but wait for feature X; [no-op] ones mean nothing here.\n")
	all := All()
	for _, g := range Groups {
		var opts []*Option
		for _, o := range all {
			if o.Group == g {
				opts = append(opts, o)
			}
		}
		if len(opts) == 0 {
			continue
		}
		if g != "" {
			fmt.Fprintf(w, "\n%s:\n", g)
		} else {
			fmt.Fprintln(w)
		}
		for _, o := range opts {
			line := "  --" + o.Name
			if l := o.label(); l != "" {
				line += " <" + l + ">"
			}
			fmt.Fprintln(w, line)
			text := o.Usage
			if o.Default != "" && o.Kind != None {
				text += " Default: " + o.Default + "."
			}
			switch {
			case o.Status == Planned:
				text += " [planned: " + o.Feature + "]"
			case o.Status == NoOp:
				text += " [no-op: " + o.Feature + "]"
			case o.Inferd:
				text += " [inferd]"
			}
			for _, l := range wrap(text, 76) {
				fmt.Fprintln(w, "\t"+l)
			}
		}
	}
}

// wrap splits text into lines of at most width characters, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, word := range strings.Fields(text) {
		if cur.Len() > 0 && cur.Len()+1+len(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}
