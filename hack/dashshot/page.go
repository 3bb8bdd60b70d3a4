package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// legendRef is {{label}} in a legendFormat.
var legendRef = regexp.MustCompile(`\{\{\s*\w+\s*\}\}`)

// Grafana's grid: 24 columns, rows of 30 px with 8 px between.
const (
	gridCols   = 24
	cellH      = 38
	pageMargin = 8
	headerH    = 56
	titleH     = 28
)

// palette is Grafana's classic series colours.
var palette = []string{"#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9", "#FADE2A", "#96D98D", "#FF9830"}

// drawn is one panel's outcome: its lines, or why it has none.
type drawn struct {
	Panel  panel
	Lines  []line
	Failed string // the refused or failed query, when one was
}

// line is one series of a panel with its legend name.
type line struct {
	Name   string
	Points []point
}

func (d drawn) hasData() bool {
	return slices.ContainsFunc(d.Lines, func(l line) bool { return len(l.Points) > 0 })
}

// box is a panel's place on the page, in pixels.
type box struct{ X, Y, W, H int }

// layout places the panels as Grafana's gridPos does on a page width px
// wide; a panel without a gridPos gets a full-width row below the rest.
// It returns the boxes and the page's height.
func layout(ps []panel, width int) ([]box, int) {
	col := float64(width-2*pageMargin) / gridCols
	bottom := 0
	for _, p := range ps {
		bottom = max(bottom, p.GridPos.Y+p.GridPos.H)
	}
	boxes := make([]box, len(ps))
	for i, p := range ps {
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 {
			g.X, g.Y, g.W, g.H = 0, bottom, gridCols, 8
			bottom += 8
		}
		x := pageMargin + int(math.Round(float64(g.X)*col))
		boxes[i] = box{x, headerH + g.Y*cellH, int(math.Round(float64(g.W)*col)) - pageMargin, g.H*cellH - pageMargin}
	}
	return boxes, headerH + bottom*cellH + pageMargin
}

// writePage writes the self-contained page: one figure per panel (its
// data-state "data", "nodata" or "error"), inline SVG and CSS only.
func writePage(w io.Writer, title string, win window, ds []drawn, width int) int {
	panels := make([]panel, len(ds))
	for i, d := range ds {
		panels[i] = d.Panel
	}
	boxes, height := layout(panels, width)
	fmt.Fprintf(w, `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title><style>
html,body{margin:0;background:#111217;color:#ccccdc;font:12px/1.3 "DejaVu Sans",Arial,sans-serif;}
body{width:%dpx;height:%dpx;position:relative;overflow:hidden}
header{position:absolute;left:%dpx;top:0;height:%dpx;display:flex;align-items:center;gap:24px}
header h1{font-size:18px;font-weight:500;margin:0;color:#fff}
figure.panel{position:absolute;margin:0;background:#181b1f;border:1px solid #2c3235;border-radius:2px;box-sizing:border-box}
figcaption{height:%dpx;line-height:%dpx;padding:0 8px;font-weight:500;color:#ccccdc;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
svg{display:block}
</style></head><body>
<header><h1>%s</h1><span>%s → %s UTC, step %s</span></header>
`, html.EscapeString(title), width, height, pageMargin, headerH, titleH, titleH, html.EscapeString(title),
		win.Start.UTC().Format("2006-01-02 15:04:05"), win.End.UTC().Format("15:04:05"), win.Step)
	for i, d := range ds {
		writePanel(w, d, boxes[i], win)
	}
	io.WriteString(w, "</body></html>\n")
	return height
}

func writePanel(w io.Writer, d drawn, b box, win window) {
	state := "data"
	switch {
	case d.Failed != "":
		state = "error"
	case !d.hasData():
		state = "nodata"
	}
	fmt.Fprintf(w, `<figure class="panel" data-title="%s" data-state="%s" data-series="%d" style="left:%dpx;top:%dpx;width:%dpx;height:%dpx">`+
		"<figcaption>%s</figcaption>\n", html.EscapeString(d.Panel.Title), state, len(d.Lines), b.X, b.Y, b.W, b.H, html.EscapeString(d.Panel.Title))
	cw, ch := b.W-2, b.H-titleH-2
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`, cw, ch, cw, ch)
	switch {
	case state == "error":
		centred(w, cw, ch, "#F2495C", 14, "query error: "+d.Failed)
	case state == "nodata":
		centred(w, cw, ch, "#8e8e8e", 16, "No data")
	case d.Panel.Type == "stat":
		writeStat(w, d, cw, ch, win)
	default:
		writeChart(w, d, cw, ch, win)
	}
	io.WriteString(w, "</svg></figure>\n")
}

func centred(w io.Writer, cw, ch int, color string, size int, text string) {
	fmt.Fprintf(w, `<text x="%d" y="%d" fill="%s" font-size="%d" text-anchor="middle" dominant-baseline="middle">%s</text>`,
		cw/2, ch/2, color, size, html.EscapeString(text))
}

// writeStat draws Grafana's stat: the last value of each series, large,
// over a faint sparkline of the first.
func writeStat(w io.Writer, d drawn, cw, ch int, win window) {
	var shown []line
	for _, l := range d.Lines {
		if len(l.Points) > 0 {
			shown = append(shown, l)
		}
	}
	lo, hi := yRange(shown[:1])
	plot := box{0, ch / 2, cw, ch - ch/2}
	fmt.Fprintf(w, `<path d="%s" fill="none" stroke="%s" stroke-opacity="0.35" stroke-width="1.5"/>`, pathOf(shown[0].Points, plot, win, lo, hi), palette[0])
	n := min(len(shown), 4)
	for i := range n {
		l := shown[i]
		x := cw * (2*i + 1) / (2 * n)
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="%s" font-size="%d" font-weight="500" text-anchor="middle">%s</text>`,
			x, ch/2+4, palette[0], min(40, ch/2), html.EscapeString(formatValue(d.Panel.FieldConfig.Defaults.Unit, l.Points[len(l.Points)-1].V)))
		if len(shown) > 1 {
			fmt.Fprintf(w, `<text x="%d" y="%d" fill="#ccccdc" font-size="11" text-anchor="middle">%s</text>`, x, ch/2+20, html.EscapeString(clip(l.Name, 40)))
		}
	}
}

// writeChart draws a time series panel: axes with the panel's unit, one
// path per series, and a legend on the right with each series' last value.
func writeChart(w io.Writer, d drawn, cw, ch int, win window) {
	legendW := min(300, cw*2/5)
	plot := box{56, 8, cw - legendW - 56 - 12, ch - 8 - 22}
	lo, hi := yRange(d.Lines)
	unit := d.Panel.FieldConfig.Defaults.Unit
	step := niceStep(hi-lo, max(2, plot.H/40))
	for v := math.Ceil(lo/step) * step; v <= hi+step/1e6; v += step {
		y := yOf(v, plot, lo, hi)
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2c3235"/><text x="%d" y="%.1f" fill="#8e8e8e" font-size="10" text-anchor="end" dominant-baseline="middle">%s</text>`,
			plot.X, plot.X+plot.W, y, y, plot.X-6, y, html.EscapeString(formatValue(unit, v)))
	}
	span := win.End.Sub(win.Start)
	ts := timeStep(span, max(2, plot.W/90))
	for t := win.Start.Truncate(ts).Add(ts); !t.After(win.End); t = t.Add(ts) {
		x := xOf(t, plot, win)
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#2c3235"/><text x="%.1f" y="%d" fill="#8e8e8e" font-size="10" text-anchor="middle">%s</text>`,
			x, x, plot.Y, plot.Y+plot.H, x, plot.Y+plot.H+15, timeLabel(t, ts))
	}
	for i, l := range d.Lines {
		if len(l.Points) > 0 {
			fmt.Fprintf(w, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, pathOf(l.Points, plot, win, lo, hi), palette[i%len(palette)])
		}
	}
	writeLegend(w, d, box{cw - legendW, 6, legendW - 6, ch - 12})
}

// writeLegend is Grafana's table legend: name and last value, as many
// rows as fit, then how many more there are.
func writeLegend(w io.Writer, d drawn, b box) {
	rows := max(1, b.H/16)
	for i, l := range d.Lines {
		y := b.Y + 12 + i*16
		if i == rows-1 && len(d.Lines) > rows {
			fmt.Fprintf(w, `<text x="%d" y="%d" fill="#8e8e8e" font-size="11">+%d more</text>`, b.X, y, len(d.Lines)-i)
			return
		}
		last := "–"
		if len(l.Points) > 0 {
			last = formatValue(d.Panel.FieldConfig.Defaults.Unit, l.Points[len(l.Points)-1].V)
		}
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="14" height="4" rx="1" fill="%s"/><text x="%d" y="%d" fill="#ccccdc" font-size="11">%s</text><text x="%d" y="%d" fill="#ccccdc" font-size="11" text-anchor="end">%s</text>`,
			b.X, y-4, palette[i%len(palette)], b.X+20, y, html.EscapeString(clip(l.Name, (b.W-90)/6)), b.X+b.W, y, html.EscapeString(last))
	}
}

// yRange is the value range the axis shows: the lines' values with 0 in
// it, never empty.
func yRange(ls []line) (lo, hi float64) {
	for _, l := range ls {
		for _, p := range l.Points {
			lo, hi = min(lo, p.V), max(hi, p.V)
		}
	}
	if hi-lo < 1e-9 {
		hi = lo + 1
	}
	return lo, hi + (hi-lo)*0.05
}

func xOf(t time.Time, plot box, win window) float64 {
	f := float64(t.Sub(win.Start)) / float64(max(1, win.End.Sub(win.Start)))
	return float64(plot.X) + f*float64(plot.W)
}

func yOf(v float64, plot box, lo, hi float64) float64 {
	return float64(plot.Y+plot.H) - (v-lo)/(hi-lo)*float64(plot.H)
}

// pathOf is an SVG path through the points; a gap of more than two steps
// (no sample there) lifts the pen.
func pathOf(ps []point, plot box, win window, lo, hi float64) string {
	var b strings.Builder
	for i, p := range ps {
		cmd := "L"
		if i == 0 || p.T.Sub(ps[i-1].T) > 2*win.Step {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f", cmd, xOf(p.T, plot, win), yOf(p.V, plot, lo, hi))
	}
	return b.String()
}

func clip(s string, n int) string {
	r := []rune(s)
	if n < 2 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
