package openai

import (
	"cmp"
	"slices"
)

// lengthGroups orders rows by length (shortest first) and cuts the order
// into runs of at most size rows whose longest is within 2× of their
// shortest, for a model whose batcher pads across requests
// (textmodel.Model.PaddedBatch): each run goes as its own request, padded
// to its own longest, and the batcher groups runs of similar length from
// every caller (core/padbatch, core/dynamic form.go). order[k] is the
// input index of sorted row k; parts index the sorted rows.
func lengthGroups(rows []row, size int) (order []int, parts [][2]int) {
	order = make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(rows[a].ids), len(rows[b].ids)) })
	lo := 0
	for k := range order {
		first := len(rows[order[lo]].ids)
		if k > lo && (k-lo >= size || len(rows[order[k]].ids) > 2*max(first, 1)) {
			parts = append(parts, [2]int{lo, k})
			lo = k
		}
	}
	if len(order) > 0 {
		parts = append(parts, [2]int{lo, len(order)})
	}
	return order, parts
}
