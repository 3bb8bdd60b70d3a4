package slurm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

func testPart(name string, cpus, free int) partLoad {
	p := newPartLoad(name)
	p.state, p.totalCPUs, p.freeCPUs, p.totalNodes, p.freeNodes = "UP", cpus, free, 1, 0
	return p
}

// TestJudgeFits: each limit a job can pass makes it not fit, with a reason
// in the probe's words; a list fits where any partition fits and reports
// the one with the most free CPUs.
func TestJudgeFits(t *testing.T) {
	d := demand{tasks: 2, cpusPerTask: 3, parallel: 1}
	l := judge(d, []partLoad{testPart("a", 8, 8)})
	assert.True(t, l.Fits)
	assert.Equal(t, 6, l.JobCPUs)
	assert.Equal(t, "a", l.Queue)

	for name, c := range map[string]struct {
		d    demand
		edit func(*partLoad)
		why  string
	}{
		"cpus":      {demand{tasks: 3, cpusPerTask: 3}, nil, "asks for 9 CPUs"},
		"nodes":     {demand{tasks: 1, cpusPerTask: 1, nodes: 2}, nil, "asks for 2 nodes; partition a has 1"},
		"max nodes": {demand{tasks: 1, cpusPerTask: 1, nodes: 2}, func(p *partLoad) { p.totalNodes, p.maxNodes = 4, 1 }, "allows 1 a job"},
		"per node":  {demand{tasks: 3, cpusPerTask: 1}, func(p *partLoad) { p.maxCPUs = 2 }, "has 2 for one job"},
		"time":      {demand{tasks: 1, cpusPerTask: 1, minutes: 61}, func(p *partLoad) { p.maxMinutes = 60 }, "01:01:00, is over partition a's maximum, 01:00:00"},
		"infinite":  {demand{tasks: 1, cpusPerTask: 1, minutes: -1}, func(p *partLoad) { p.maxMinutes = 2 * 24 * 60 }, "no time limit; partition a allows 2-00:00:00"},
		"down":      {demand{tasks: 1, cpusPerTask: 1}, func(p *partLoad) { p.state = "DOWN" }, "is down"},
		"drain":     {demand{tasks: 1, cpusPerTask: 1}, func(p *partLoad) { p.state = "DRAIN" }, "is draining"},
		"odd state": {demand{tasks: 1, cpusPerTask: 1}, func(p *partLoad) { p.state = "<b>x</b>" }, "partition a is not up"},
	} {
		p := testPart("a", 8, 8)
		if c.edit != nil {
			c.edit(&p)
		}
		l := judge(c.d, []partLoad{p})
		assert.False(t, l.Fits, name)
		assert.Contains(t, l.Why, c.why, name)
		assert.NotContains(t, l.Why, "<b>", name)
	}

	// An array: one task must fit; JobCPUs counts the tasks that run at once.
	a := backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 99}}, MaxParallel: 5}
	ad := newDemand(&a)
	ad.cpusPerTask = 2
	l = judge(ad, []partLoad{testPart("a", 8, 8)})
	assert.True(t, l.Fits)
	assert.Equal(t, 10, l.JobCPUs)

	// A list: the fitting partition with the most free CPUs; fits if any.
	small, big, busy := testPart("small", 2, 2), testPart("big", 16, 4), testPart("busy", 16, 16)
	busy.state = "DRAIN"
	l = judge(demand{tasks: 4, cpusPerTask: 1}, []partLoad{small, big, busy})
	assert.True(t, l.Fits, l.Why)
	assert.Equal(t, "small,big,busy", l.Queue)
	assert.Equal(t, 16, l.TotalCPUs)
	assert.Equal(t, 4, l.FreeCPUs)
	l = judge(demand{tasks: 40, cpusPerTask: 1}, []partLoad{small, big})
	assert.False(t, l.Fits)
	assert.Contains(t, l.Why, "partition small has 2")
	assert.Contains(t, l.Why, "partition big has 16")
}

// TestPickParts: the default partition, a list in its order, and an
// unknown name refused as jobproperties.partition.
func TestPickParts(t *testing.T) {
	a, b := newPartLoad("a"), newPartLoad("b")
	b.isDefault = true
	all := []partLoad{a, b}
	var d demand
	got, ok, err := pickParts(d, all)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "b", got[0].name)
	d.setPartitions(" b, a ")
	got, _, _ = pickParts(d, all)
	assert.Equal(t, []string{"b", "a"}, []string{got[0].name, got[1].name})
	d.setPartitions("a,nope")
	_, _, err = pickParts(d, all)
	testutil.RequireFieldError(t, err, "jobproperties.partition")
	_, ok, err = pickParts(demand{}, []partLoad{a})
	assert.False(t, ok)
	assert.NoError(t, err)
}

// TestDemandFromJob: the REST flavour reads Submit's fields (aliases and
// #SBATCH lines included), the SSH flavour reads sbatch's options.
func TestDemandFromJob(t *testing.T) {
	job := backends.Job{Key: "k", Name: "n", Script: "#!/bin/sh\n#SBATCH --ntasks=3\n#SBATCH -c 2\n#SBATCH -t 1:00:00\n",
		Properties: json.RawMessage(`{"Queue":"a,b","NodesNumber":"2-4"}`)}
	spec, err := buildJob(job)
	require.NoError(t, err)
	d := restDemand(spec, nil)
	assert.Equal(t, []string{"a", "b"}, d.partitions)
	assert.Equal(t, demand{partitions: d.partitions, tasks: 3, cpusPerTask: 2, nodes: 2, minutes: 60, parallel: 1, count: 1}, d)
	sd, err := sshDemand(job, nil)
	require.NoError(t, err)
	assert.Equal(t, d, sd)

	job.Properties = json.RawMessage(`{"partition":"x","cpus_per_task":4,"time_limit":"INFINITE","nodes":3}`)
	spec, err = buildJob(job)
	require.NoError(t, err)
	d = restDemand(spec, nil)
	assert.Equal(t, demand{partitions: []string{"x"}, tasks: 3, cpusPerTask: 4, nodes: 3, minutes: -1, parallel: 1, count: 1}, d)
	sd, err = sshDemand(job, nil)
	require.NoError(t, err)
	assert.Equal(t, d, sd)

	// No tasks given: one a node, as sbatch does.
	job = backends.Job{Key: "k", Script: "#!/bin/sh\n", Properties: json.RawMessage(`{"nodes":2}`)}
	spec, _ = buildJob(job)
	assert.Equal(t, 2, restDemand(spec, nil).taskCPUs())
}

// TestRestShapes: partitions and nodes of v0.0.38 and v0.0.40+ (as the
// real 22.05 and 24.11 answer) read alike.
func TestRestShapes(t *testing.T) {
	old := `{"partitions":[{"flags":["default"],"name":"debug","nodes":"vm","state":"UP","total_cpus":8,"total_nodes":1,
		"max_time_limit":-1,"maximum_nodes_per_job":-1,"maximum_cpus_per_node":-1},
		{"flags":[],"name":"short","nodes":"vm","state":"DRAIN","total_cpus":8,"total_nodes":1,"max_time_limit":30,"maximum_nodes_per_job":1,"maximum_cpus_per_node":2}]}`
	nu := `{"partitions":[{"name":"debug","nodes":{"allowed_allocation":"","configured":"localhost","total":1},"cpus":{"task_binding":0,"total":8},
		"maximums":{"cpus_per_node":{"set":false,"infinite":true,"number":0},"nodes":{"set":false,"infinite":true,"number":0},"time":{"set":false,"infinite":true,"number":0}},
		"partition":{"state":["UP"]}},
		{"name":"short","nodes":{"total":1},"cpus":{"total":8},"maximums":{"cpus_per_node":{"set":true,"infinite":false,"number":2},
		"nodes":{"set":true,"infinite":false,"number":1},"time":{"set":true,"infinite":false,"number":30}},"partition":{"state":["DRAIN"]}}]}`
	for name, body := range map[string]string{"v0.0.38": old, "v0.0.42": nu} {
		var pr struct{ Partitions []restPartition }
		require.NoError(t, json.Unmarshal([]byte(body), &pr), name)
		d, s := pr.Partitions[0].load(), pr.Partitions[1].load()
		assert.Equal(t, partLoad{name: "debug", isDefault: name == "v0.0.38", state: "UP", totalCPUs: 8, totalNodes: 1, maxMinutes: -1, maxNodes: -1, maxCPUs: -1}, d, name)
		assert.Equal(t, partLoad{name: "short", state: "DRAIN", totalCPUs: 8, totalNodes: 1, maxMinutes: 30, maxNodes: 1, maxCPUs: 2}, s, name)
	}
	parts := []partLoad{testPart("debug", 8, 0), testPart("short", 8, 0)}
	parts[1].maxCPUs = 2
	for _, n := range []string{
		`{"cpus":8,"alloc_cpus":3,"state":"mixed","state_flags":[],"partitions":["debug","short"]}`,
		`{"cpus":8,"alloc_cpus":0,"state":["IDLE"],"partitions":["debug"]}`,
		`{"cpus":8,"alloc_cpus":0,"state":"idle","state_flags":["DRAIN"],"partitions":["debug"]}`,
		`{"cpus":8,"alloc_cpus":0,"state":["IDLE","DRAIN"],"partitions":["debug"]}`,
		`{"cpus":8,"alloc_cpus":0,"state":["DOWN"],"partitions":["debug"]}`,
	} {
		var ni nodeInfo
		require.NoError(t, json.Unmarshal([]byte(n), &ni))
		ni.addTo(parts)
	}
	assert.Equal(t, 5+8, parts[0].freeCPUs)
	assert.Equal(t, 1, parts[0].freeNodes)
	assert.Equal(t, 2, parts[1].freeCPUs)
}

// TestDecodeQueue: pending and running jobs of either shape, a pending
// array's record counted with its tasks, other states left out.
func TestDecodeQueue(t *testing.T) {
	body := `{"meta":{"x":[1,2]},"jobs":[
		{"job_state":"PENDING","partition":"a,b","cpus":2,"array_task_string":""},
		{"job_state":["PENDING"],"partition":"a","cpus":{"set":true,"infinite":false,"number":1},"array_task_string":"5-9%2"},
		{"job_state":["RUNNING","CONFIGURING"],"partition":"a","cpus":{"set":true,"number":4}},
		{"job_state":"COMPLETED","partition":"a","cpus":1}],"errors":[]}`
	q, err := decodeQueue(strings.NewReader(body))
	require.NoError(t, err)
	require.Len(t, q, 3)
	parts := []partLoad{newPartLoad("a"), newPartLoad("b")}
	for _, j := range q {
		countJob(parts, j.state, j.partition, j.cpus, j.tasks, j.secs)
	}
	assert.Equal(t, 2, parts[0].pending)
	assert.Equal(t, 2+5, parts[0].pendCPUs)
	assert.Equal(t, 1, parts[0].running)
	assert.Equal(t, 1, parts[1].pending)
	_, err = decodeQueue(strings.NewReader(`{"jobs":{"a":1}}`))
	assert.Error(t, err)
	assert.False(t, unattributed(q))
	assert.False(t, unattributed(nil))
	assert.True(t, unattributed([]queuedJob{{state: "PENDING", cpus: 1, tasks: 1}}))
}

// TestParseSinfo: a partition on several lines adds up; the default is
// marked; limits read as sinfo prints them.
func TestParseSinfo(t *testing.T) {
	out := "debug*|up|infinite|2/6/0/8|0/1/0/1|1-infinite|UNLIMITED\n" +
		"short|drain|30:00|0/8/0/8|0/1/0/1|1-2|2\n" +
		"debug*|up|infinite|8/0/0/8|1/0/0/1|1-infinite|UNLIMITED\n" +
		"garbage line\n"
	parts := parseSinfo(out)
	require.Len(t, parts, 2)
	d := parts[0]
	assert.True(t, d.isDefault)
	assert.Equal(t, [6]int{16, 6, 2, 1, -1, -1}, [6]int{d.totalCPUs, d.freeCPUs, d.totalNodes, d.freeNodes, d.maxNodes, d.maxCPUs})
	assert.Equal(t, int64(-1), d.maxMinutes)
	s := parts[1]
	assert.Equal(t, "DRAIN", s.state)
	assert.Equal(t, [3]int64{30, 2, 2}, [3]int64{s.maxMinutes, int64(s.maxNodes), int64(s.maxCPUs)})
}

// TestTestOnlyLine: sbatch --test-only's documented line gives the start;
// anything else gives none.
func TestTestOnlyLine(t *testing.T) {
	m := testOnlyLine().FindStringSubmatch("sbatch: Job 5656 to start at 2026-11-27T01:26:42 using 2 processors on nodes vm in partition debug\n")
	require.NotNil(t, m)
	want := time.Date(2026, 11, 27, 1, 26, 42, 0, time.Local).UTC()
	assert.Equal(t, want, slurmTime(m[1]))
	assert.Nil(t, testOnlyLine().FindStringSubmatch("allocation failure: Requested node configuration is not available"))
	assert.Equal(t, 995, arrayTaskCount("5-999%50"))
	assert.Equal(t, 1, arrayTaskCount("N/A"))
}

// A partition capped at two CPUs a node, both in use by its own jobs, has
// none free however idle its node is, and two CPUs in all.
func TestPartitionCapLimitsFreeCPUs(t *testing.T) {
	p := newPartLoad("short")
	p.state, p.totalCPUs, p.totalNodes, p.maxCPUs, p.freeCPUs = "UP", 8, 1, 2, 2 // the node's 6 idle, capped at 2
	parts := []partLoad{p}
	countJob(parts, "RUNNING", "short", 1, 1, 60)
	countJob(parts, "RUNNING", "short", 1, 1, 60)
	countJob(parts, "PENDING", "short", 1, 1, 60)
	l := judge(demand{tasks: 1, cpusPerTask: 1, nodes: 1, parallel: 1}, parts)
	assert.Equal(t, [3]int{0, 2, 1}, [3]int{l.FreeCPUs, l.TotalCPUs, l.PendingJobs})

	parts = []partLoad{p}
	countJob(parts, "RUNNING", "short", 1, 1, 60)
	l = judge(demand{tasks: 1, cpusPerTask: 1, nodes: 1, parallel: 1}, parts)
	assert.Equal(t, 1, l.FreeCPUs, "one of its two CPUs is left")
}

// TestQueueCPUSeconds: pending jobs count CPUs × time limit, running ones
// CPUs × time left (from start_time, in either version's shape); a job
// without a finite limit counts the partition's MaxTime, and where there
// is none the partition's CPU-seconds are unknown.
func TestQueueCPUSeconds(t *testing.T) {
	started := time.Now().Add(-10 * time.Minute).Unix()
	body := fmt.Sprintf(`{"jobs":[
		{"job_state":"PENDING","partition":"a","cpus":2,"time_limit":60},
		{"job_state":["PENDING"],"partition":"a","cpus":{"set":true,"number":1},"time_limit":{"set":true,"infinite":false,"number":1},"array_task_string":"0-3"},
		{"job_state":["RUNNING"],"partition":"a","cpus":{"set":true,"number":4},"time_limit":{"set":true,"number":30},"start_time":{"set":true,"number":%d}},
		{"job_state":"PENDING","partition":"b","cpus":1,"time_limit":4294967295},
		{"job_state":["PENDING"],"partition":"c","cpus":1,"time_limit":{"set":false,"infinite":true,"number":0}}]}`, started)
	q, err := decodeQueue(strings.NewReader(body))
	require.NoError(t, err)
	a, b, c := newPartLoad("a"), newPartLoad("b"), newPartLoad("c")
	b.maxMinutes = 5
	parts := []partLoad{a, b, c}
	for _, j := range q {
		countJob(parts, j.state, j.partition, j.cpus, j.tasks, j.secs)
	}
	assert.Equal(t, int64(2*3600+4*60), parts[0].pendSecs)
	assert.InDelta(t, 4*20*60, parts[0].runSecs, 4*120, "4 CPUs × the 20 minutes left of 30")
	assert.False(t, parts[0].noSecs)
	assert.Equal(t, int64(300), parts[1].pendSecs, "no limit: the partition's MaxTime")
	assert.False(t, parts[1].noSecs)
	assert.True(t, parts[2].noSecs, "no limit anywhere: unknown, not zero")
}

func TestSlurmDuration(t *testing.T) {
	for in, want := range map[string]int64{"1:00": 60, "59:58": 3598, "1:00:00": 3600, "2-00:00:01": 172801,
		"UNLIMITED": -1, "NOT_SET": -1, "INVALID": -1, "": -1, "1:2:3:4": -1} {
		assert.Equal(t, want, slurmDuration(in), in)
	}
}

// The job's own work: every task's CPUs times its time limit, or the
// partition's MaxTime when it gives none; unknown (0) without either.
func TestDemandCPUSeconds(t *testing.T) {
	a, err := backends.ParseArray("0-9%2")
	require.NoError(t, err)
	d := newDemand(&a)
	d.cpusPerTask, d.minutes = 2, 3
	p := newPartLoad("a")
	assert.Equal(t, int64(10*2*180), d.cpuSeconds(p))
	d.minutes = 0
	assert.Zero(t, d.cpuSeconds(p))
	p.maxMinutes = 60
	assert.Equal(t, int64(10*2*3600), d.cpuSeconds(p))
}
