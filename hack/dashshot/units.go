package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// formatValue writes v in the panel's Grafana unit, as the axis and the
// legend show it. Units the page does not know are drawn as "short".
func formatValue(unit string, v float64) string {
	switch unit {
	case "percentunit":
		return trimNum(v*100, 1) + "%"
	case "percent":
		return trimNum(v, 1) + "%"
	case "s":
		return seconds(v)
	case "ms":
		return seconds(v / 1000)
	case "reqps":
		return short(v) + " req/s"
	case "ops":
		return short(v) + " ops/s"
	case "bytes":
		return bytesIEC(v)
	}
	return short(v)
}

// short is Grafana's "short": SI suffixes from a thousand on.
func short(v float64) string {
	for _, s := range []struct {
		f   float64
		sfx string
	}{{1e12, " Tri"}, {1e9, " Bil"}, {1e6, " Mil"}, {1e3, " K"}} {
		if math.Abs(v) >= s.f {
			return trimNum(v/s.f, 2) + s.sfx
		}
	}
	return trimNum(v, 2)
}

func seconds(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0 s"
	case a < 1e-3:
		return trimNum(v*1e6, 1) + " µs"
	case a < 1:
		return trimNum(v*1e3, 1) + " ms"
	case a < 60:
		return trimNum(v, 2) + " s"
	case a < 3600:
		return trimNum(v/60, 1) + " min"
	}
	return trimNum(v/3600, 1) + " h"
}

func bytesIEC(v float64) string {
	units := []string{" B", " KiB", " MiB", " GiB", " TiB"}
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return trimNum(v, 1) + units[i]
}

// trimNum prints v with at most maxDec decimals (fewer for large values),
// trailing zeros dropped.
func trimNum(v float64, maxDec int) string {
	dec := maxDec
	if math.Abs(v) >= 100 {
		dec = 0
	} else if math.Abs(v) >= 10 {
		dec = min(dec, 1)
	}
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// niceStep is a round step (1, 2 or 5 times a power of ten) that cuts
// span into about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// timeStep is a round step for the time axis that cuts span into about
// n parts.
func timeStep(span time.Duration, n int) time.Duration {
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
		30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour} {
		if span/d <= time.Duration(n) {
			return d
		}
	}
	return 24 * time.Hour * time.Duration(int64(span/(24*time.Hour))/int64(n)+1)
}

// timeLabel is a tick's label: seconds shown when the ticks are closer
// than a minute, in UTC like the page's header.
func timeLabel(t time.Time, step time.Duration) string {
	if step < time.Minute {
		return t.UTC().Format("15:04:05")
	}
	if step >= 24*time.Hour {
		return t.UTC().Format("01-02")
	}
	return t.UTC().Format("15:04")
}

// legendName is Grafana's legendFormat with {{label}} replaced; without
// one, the series' labels as Prometheus prints them.
func legendName(format string, labels map[string]string) string {
	if strings.TrimSpace(format) == "" {
		return labelString(labels)
	}
	return legendRef.ReplaceAllStringFunc(format, func(m string) string {
		return labels[strings.TrimSpace(strings.Trim(m, "{}"))]
	})
}

func labelString(labels map[string]string) string {
	keys := sortedKeys(labels)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if k != "__name__" {
			parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
		}
	}
	return labels["__name__"] + "{" + strings.Join(parts, ", ") + "}"
}
