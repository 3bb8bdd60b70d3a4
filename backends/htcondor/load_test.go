package htcondor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPoolLoad: static slots count when Unclaimed, dynamic slots are parts
// of their partitionable slot, and the job fits in the largest slot only.
func TestPoolLoad(t *testing.T) {
	slots := []slotAd{
		{Machine: "a", SlotType: "Partitionable", Cpus: 2, Memory: 1000, TotalSlotCpus: 8, TotalSlotMemory: 16000},
		{Machine: "a", SlotType: "Dynamic", Cpus: 6, Memory: 15000, State: "Claimed"},
		{Machine: "b", Cpus: 1, Memory: 2000, State: "Unclaimed"},
		{Machine: "b", Cpus: 1, Memory: 2000, State: "Claimed"},
	}
	load := judgePool(measurePool(slots), request{cpus: 8, memoryMB: 16000}, nil)
	if !load.Fits || load.TotalCPUs != 10 || load.FreeCPUs != 3 || load.TotalNodes != 2 || load.FreeNodes != 0 {
		t.Fatalf("%+v", load)
	}
	if load := judgePool(measurePool(slots), request{cpus: 9, memoryMB: -1}, nil); load.Fits || load.Why == "" {
		t.Fatalf("9 CPUs: %+v", load)
	}
	if load := judgePool(measurePool(nil), request{cpus: 1, memoryMB: -1}, nil); load.Fits || load.TotalCPUs != 0 {
		t.Fatalf("no slots: %+v", load)
	}
	for v, want := range map[string]float64{"512": 512, "2GB": 2048, "2 g": 2048, "1024K": 1, "1T": 1 << 20, "RequestCpus*1024": -1, "-1": -1} {
		if got := memoryMB(v); got != want {
			t.Errorf("memoryMB(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestMeasureKeepsWhatFits: the published measure keeps only the largest
// slot shapes; whatever the slots and the request, a job fits by the
// measure exactly when some slot is large enough for it.
func TestMeasureKeepsWhatFits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 500; n++ {
		var slots []slotAd
		for i := rng.IntN(12); i > 0; i-- {
			slots = append(slots, slotAd{Machine: fmt.Sprint("m", rng.IntN(4)), Cpus: float64(1 + rng.IntN(8)), Memory: float64(512 * (1 + rng.IntN(8))), State: "Unclaimed"})
		}
		req := request{cpus: 1 + rng.IntN(9), memoryMB: float64(512*rng.IntN(9)) - 1}
		want := false
		for _, s := range slots {
			want = want || (s.Cpus >= float64(req.cpus) && (req.memoryMB < 0 || s.Memory >= req.memoryMB))
		}
		m := measurePool(slots)
		if got := judgePool(m, req, nil).Fits; got != want {
			t.Fatalf("slots %+v, request %+v: fits %v by the measure %+v, want %v", slots, req, got, m.Shapes, want)
		}
		if len(m.Shapes) > len(slots) {
			t.Fatalf("%d shapes of %d slots", len(m.Shapes), len(slots))
		}
	}
}
