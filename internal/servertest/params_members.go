package servertest

import "strconv"

// ParamMembers is the text of n JSON object members "<prefix><i>":<i>,
// comma-separated: the inside of a large "parameters" object, for the
// tests that a request's parameters are decoded in time linear in their
// size.
func ParamMembers(n int, prefix string) []byte {
	var b []byte
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, prefix...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, int64(i), 10)
	}
	return b
}
