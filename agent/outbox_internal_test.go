package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

func obsChange(name, id string, st backends.State) change {
	return change{j: job{ns: "ns", name: name}, obs: watcher.Observation{ID: id, State: st, Raw: string(st)}}
}

// The outbox writes a job's end before any news queued earlier, then the
// rest in the order queued; a record's newer news replaces what of it
// still waits; a record being written waits for that write.
func TestOutboxTakesEndsFirstAndTheNewestNews(t *testing.T) {
	o := newOutbox()
	o.put(obsChange("a", "1", backends.Running))
	o.put(obsChange("b", "2", backends.Pending))
	o.put(obsChange("c", "3", backends.Running))
	o.put(obsChange("d", "4", backends.Done))
	o.put(obsChange("b", "2", backends.Running)) // b's newer news
	assert.True(t, o.holds("ns/b", obsChange("b", "2", backends.Running).obs.String()))
	assert.False(t, o.holds("ns/b", obsChange("b", "2", backends.Pending).obs.String()), "replaced")

	var order []string
	c, ok := o.take()
	require.True(t, ok)
	order = append(order, c.j.name+" "+string(c.obs.State))
	o.put(obsChange("d", "4", backends.Failed)) // d is being written: its next waits
	for {
		c, ok := o.take()
		if !ok {
			break
		}
		order = append(order, c.j.name+" "+string(c.obs.State))
		if c.j.name != "d" {
			o.done(recordKey(c.j))
		}
	}
	assert.Equal(t, []string{"d DONE", "a RUNNING", "c RUNNING", "b RUNNING"}, order)
	assert.True(t, o.holds("ns/d", obsChange("d", "4", backends.Done).obs.String()), "being written")
	o.done("ns/d")
	c, ok = o.take()
	require.True(t, ok, "d's next, once its write ended")
	assert.Equal(t, backends.Failed, c.obs.State)
}
