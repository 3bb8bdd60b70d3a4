package slurm

// The load probe split for a cluster's agent (backends.LoadPublisher): the
// agent measures every partition once for every step (MeasureLoad, the
// probe's own three GETs) and publishes the measure; a step judges its job
// against it (LoadFrom) the way ProbeLoad judges a fresh one. Over SSH
// (SSHBackend) the measure is the same, read with sinfo and squeue.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bridge-runner/bridge-runner/backends"
)

// loadMeasure is every partition's load, before any job is judged.
type loadMeasure struct {
	parts []partLoad
	// noQueue: the queue's counts are unknown (it did not come, or no job
	// in it says its partition).
	noQueue bool
}

// measureFormat names the published measure's format: a measure of any
// other is not read (the step probes for itself).
const measureFormat = 1

// wirePart is a partLoad as published.
type wirePart struct {
	Name       string `json:"n"`
	Default    bool   `json:"d,omitempty"`
	State      string `json:"s"`
	TotalCPUs  int    `json:"tc"`
	FreeCPUs   int    `json:"fc"`
	TotalNodes int    `json:"tn"`
	FreeNodes  int    `json:"fn"`
	MaxMinutes int64  `json:"mm"`
	MaxNodes   int    `json:"mn"`
	MaxCPUs    int    `json:"mc"`
	Pending    int    `json:"p"`
	Running    int    `json:"r"`
	PendCPUs   int    `json:"pc"`
	RunCPUs    int    `json:"rc"`
	PendSecs   int64  `json:"ps"`
	RunSecs    int64  `json:"rs"`
	NoSecs     bool   `json:"ns,omitempty"`
}

type wireMeasure struct {
	Format  int        `json:"f"`
	NoQueue bool       `json:"nq,omitempty"`
	Parts   []wirePart `json:"p"`
}

// MeasureLoad implements backends.LoadPublisher.
func (b *Backend) MeasureLoad(ctx context.Context) (string, error) {
	m, err := b.measure(ctx)
	if err != nil {
		return "", err
	}
	return encodeMeasure(m)
}

// encodeMeasure is m as published: one line (JSON escapes every newline)
// of parsed figures and partition names only.
func encodeMeasure(m loadMeasure) (string, error) {
	w := wireMeasure{Format: measureFormat, NoQueue: m.noQueue, Parts: make([]wirePart, len(m.parts))}
	for i, p := range m.parts {
		w.Parts[i] = wirePart{p.name, p.isDefault, p.state, p.totalCPUs, p.freeCPUs, p.totalNodes, p.freeNodes,
			p.maxMinutes, p.maxNodes, p.maxCPUs, p.pending, p.running, p.pendCPUs, p.runCPUs, p.pendSecs, p.runSecs, p.noSecs}
	}
	return backends.EncodeMeasure(w, fmt.Sprintf("%d partitions", len(m.parts)))
}

// decodeMeasure reads what encodeMeasure wrote.
func decodeMeasure(measure string) (loadMeasure, error) {
	var w wireMeasure
	if json.Unmarshal([]byte(measure), &w) != nil || w.Format != measureFormat || len(w.Parts) == 0 {
		return loadMeasure{}, backends.ErrMeasureFormat
	}
	m := loadMeasure{noQueue: w.NoQueue, parts: make([]partLoad, len(w.Parts))}
	for i, p := range w.Parts {
		m.parts[i] = partLoad{name: p.Name, isDefault: p.Default, state: p.State, totalCPUs: p.TotalCPUs, freeCPUs: p.FreeCPUs,
			totalNodes: p.TotalNodes, freeNodes: p.FreeNodes, maxMinutes: p.MaxMinutes, maxNodes: p.MaxNodes, maxCPUs: p.MaxCPUs,
			pending: p.Pending, running: p.Running, pendCPUs: p.PendCPUs, runCPUs: p.RunCPUs, pendSecs: p.PendSecs, runSecs: p.RunSecs, noSecs: p.NoSecs}
	}
	return m, nil
}

// LoadFrom implements backends.LoadPublisher.
func (b *Backend) LoadFrom(measure string, job backends.Job, array *backends.Array) (backends.Load, error) {
	m, err := decodeMeasure(measure)
	if err != nil {
		return backends.Load{}, err
	}
	spec, err := buildJob(job)
	if err != nil {
		return backends.Load{}, err
	}
	return b.judgeMeasure(m, restDemand(spec, array))
}

var _ backends.LoadPublisher = (*Backend)(nil)
