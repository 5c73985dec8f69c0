package perf

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The report's charts are drawn by this small SVG writer rather than a
// charting library: the few chart kinds needed (lines with markers and
// stacked bars) fit in a page of code, the output is plain inline SVG that
// prints and needs no fonts or scripts, and every drawn point carries a
// class the browser test counts.

// palette is the Okabe-Ito colour-blind-safe set, which also stays
// distinct when printed in grey.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"}

func colour(i int) string { return palette[i%len(palette)] }

// series is one named line: points (X[i], Y[i]); NaN values are skipped.
type series struct {
	Name string
	X, Y []float64
}

// chart geometry, in SVG user units; the SVG scales to the page width.
const (
	chartW, chartH                       = 640, 300
	marginL, marginR, marginT, marginB   = 64, 16, 14, 44
	plotW, plotH                         = chartW - marginL - marginR, chartH - marginT - marginB
	tickCount                            = 5
	markerRadius                         = 3.5
	svgOpen                              = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 640 300" role="img"`
	axisStyle, gridStyle, labelTextStyle = `stroke="#333" stroke-width="1"`, `stroke="#ddd" stroke-width="1"`, `font-size="12" fill="#333"`
)

// niceTicks returns about n round tick values covering [lo, hi], at
// least minStep apart (1 for an axis of whole numbers such as
// concurrency).
func niceTicks(lo, hi float64, n int, minStep float64) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	step = math.Max(step, minStep)
	start := math.Floor(lo/step) * step
	var ticks []float64
	for v := start; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, roundTick(v, step))
	}
	if ticks[len(ticks)-1] < hi {
		ticks = append(ticks, roundTick(ticks[len(ticks)-1]+step, step))
	}
	return ticks
}

// roundTick snaps v to a multiple of step, dropping float noise such as
// 3*0.2 = 0.6000000000000001.
func roundTick(v, step float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(math.Round(v/step)*step, 'g', 12, 64), 64)
	return r
}

func fmtTick(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// axes maps data to plot coordinates and draws the frame, grid and labels.
type axes struct {
	xt, yt         []float64
	x0, x1, y0, y1 float64
}

func newAxes(xmin, xmax, ymin, ymax float64, wholeX bool) axes {
	minStep := 0.0
	if wholeX {
		minStep = 1
	}
	a := axes{xt: niceTicks(xmin, xmax, tickCount, minStep), yt: niceTicks(ymin, ymax, tickCount, 0)}
	a.x0, a.x1 = a.xt[0], a.xt[len(a.xt)-1]
	a.y0, a.y1 = a.yt[0], a.yt[len(a.yt)-1]
	return a
}

func (a axes) px(x float64) float64 { return marginL + (x-a.x0)/(a.x1-a.x0)*plotW }
func (a axes) py(y float64) float64 { return marginT + plotH - (y-a.y0)/(a.y1-a.y0)*plotH }

func (a axes) draw(b *strings.Builder, xLabel, yLabel string, xTicks bool) {
	for _, t := range a.yt {
		y := f1(a.py(t))
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%s" y2="%s" %s/>`, marginL, marginL+plotW, y, y, gridStyle)
		fmt.Fprintf(b, `<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle" %s>%s</text>`, marginL-6, y, labelTextStyle, fmtTick(t))
	}
	if xTicks {
		for _, t := range a.xt {
			x := f1(a.px(t))
			fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%d" y2="%d" %s/>`, x, x, marginT+plotH, marginT+plotH+4, axisStyle)
			fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle" %s>%s</text>`, x, marginT+plotH+17, labelTextStyle, fmtTick(t))
		}
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" %s/>`, marginL, marginL+plotW, marginT+plotH, marginT+plotH, axisStyle)
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" %s/>`, marginL, marginL, marginT, marginT+plotH, axisStyle)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" %s>%s</text>`, marginL+plotW/2, chartH-6, labelTextStyle, html.EscapeString(xLabel))
	fmt.Fprintf(b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle" %s>%s</text>`, marginT+plotH/2, labelTextStyle, html.EscapeString(yLabel))
}

// lineSVG draws each series as a polyline with a marker per point; the
// svg's data-points attribute says how many markers were drawn, and each
// marker's title gives its values (a tooltip, without scripts). ok is
// false when there is nothing to draw.
func lineSVG(id, xLabel, yLabel string, ss []series) (svg string, ok bool) {
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	n, wholeX := 0, true
	for _, s := range ss {
		for i := range s.X {
			if bad(s.X[i]) || bad(s.Y[i]) {
				continue
			}
			xmin, xmax, ymax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i]), math.Max(ymax, s.Y[i])
			wholeX = wholeX && s.X[i] == math.Trunc(s.X[i])
			n++
		}
	}
	if n == 0 {
		return "", false
	}
	if xmin == xmax {
		xmin, xmax = xmin*0.9, xmax*1.1+1e-9
	}
	a := newAxes(math.Min(xmin, 0), xmax, 0, ymax, wholeX)
	var b strings.Builder
	fmt.Fprintf(&b, `%s id="%s" data-points="%d" aria-label="%s">`, svgOpen, html.EscapeString(id), n, html.EscapeString(yLabel+" by "+xLabel))
	a.draw(&b, xLabel, yLabel, true)
	for si, s := range ss {
		var pts []string
		for i := range s.X {
			if bad(s.X[i]) || bad(s.Y[i]) {
				continue
			}
			pts = append(pts, f1(a.px(s.X[i]))+","+f1(a.py(s.Y[i])))
		}
		if len(pts) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<polyline class="line" data-series="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`,
			html.EscapeString(s.Name), colour(si), strings.Join(pts, " "))
		for i := range s.X {
			if bad(s.X[i]) || bad(s.Y[i]) {
				continue
			}
			fmt.Fprintf(&b, `<circle class="pt" cx="%s" cy="%s" r="%g" fill="%s"><title>%s: %s, %s</title></circle>`,
				f1(a.px(s.X[i])), f1(a.py(s.Y[i])), markerRadius, colour(si), html.EscapeString(s.Name), fmtTick(s.X[i]), fmtTick(s.Y[i]))
		}
	}
	b.WriteString("</svg>")
	return b.String(), true
}

// stackSVG draws one bar per category, its segments stacked in the order
// of ss (ss[k].Y[i] is segment k of bar i; X is unused). Zero segments
// are not drawn; data-points counts the drawn ones.
func stackSVG(id, xLabel, yLabel string, categories []string, ss []series) (svg string, ok bool) {
	ymax, n := 0.0, 0
	for i := range categories {
		sum := 0.0
		for _, s := range ss {
			if v := s.Y[i]; !bad(v) && v > 0 {
				sum += v
				n++
			}
		}
		ymax = math.Max(ymax, sum)
	}
	if n == 0 {
		return "", false
	}
	a := newAxes(0, 1, 0, ymax, false)
	var b strings.Builder
	fmt.Fprintf(&b, `%s id="%s" data-points="%d" aria-label="%s">`, svgOpen, html.EscapeString(id), n, html.EscapeString(yLabel+" by "+xLabel))
	a.draw(&b, xLabel, yLabel, false)
	slot := float64(plotW) / float64(len(categories))
	barW := slot * 0.6
	for i, c := range categories {
		x := marginL + slot*float64(i) + (slot-barW)/2
		base := 0.0
		for k, s := range ss {
			v := s.Y[i]
			if bad(v) || v <= 0 {
				continue
			}
			top, bottom := a.py(base+v), a.py(base)
			fmt.Fprintf(&b, `<rect class="pt" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s %s: %s</title></rect>`,
				f1(x), f1(top), f1(barW), strconv.FormatFloat(bottom-top, 'f', 2, 64), colour(k), html.EscapeString(c), html.EscapeString(s.Name), fmtTick(v))
			base += v
		}
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" %s>%s</text>`, f1(x+barW/2), marginT+plotH+17, labelTextStyle, html.EscapeString(c))
	}
	b.WriteString("</svg>")
	return b.String(), true
}

func bad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
