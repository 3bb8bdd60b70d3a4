package htcondor

import "testing"

// TestPoolLoad: static slots count when Unclaimed, dynamic slots are parts
// of their partitionable slot, and the job fits in the largest slot only.
func TestPoolLoad(t *testing.T) {
	slots := []slotAd{
		{Machine: "a", SlotType: "Partitionable", Cpus: 2, Memory: 1000, TotalSlotCpus: 8, TotalSlotMemory: 16000},
		{Machine: "a", SlotType: "Dynamic", Cpus: 6, Memory: 15000, State: "Claimed"},
		{Machine: "b", Cpus: 1, Memory: 2000, State: "Unclaimed"},
		{Machine: "b", Cpus: 1, Memory: 2000, State: "Claimed"},
	}
	load := poolLoad(slots, request{cpus: 8, memoryMB: 16000})
	if !load.Fits || load.TotalCPUs != 10 || load.FreeCPUs != 3 || load.TotalNodes != 2 || load.FreeNodes != 0 {
		t.Fatalf("%+v", load)
	}
	if load := poolLoad(slots, request{cpus: 9, memoryMB: -1}); load.Fits || load.Why == "" {
		t.Fatalf("9 CPUs: %+v", load)
	}
	if load := poolLoad(nil, request{cpus: 1, memoryMB: -1}); load.Fits || load.TotalCPUs != 0 {
		t.Fatalf("no slots: %+v", load)
	}
	for v, want := range map[string]float64{"512": 512, "2GB": 2048, "2 g": 2048, "1024K": 1, "1T": 1 << 20, "RequestCpus*1024": -1, "-1": -1} {
		if got := memoryMB(v); got != want {
			t.Errorf("memoryMB(%q) = %v, want %v", v, got, want)
		}
	}
}
