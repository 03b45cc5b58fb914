package faults

import (
	"flag"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

var (
	soak     = flag.Bool("soak", false, "run the longer randomised variant of the suite")
	seedFlag = flag.Uint64("seed", 0, "seed of the randomised choices (0: from the clock); printed by every run")
)

// seed is the seed of this run's random choices.
var seed uint64

func TestMain(m *testing.M) {
	flag.Parse()
	seed = *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	code := m.Run()
	testkit.RemoveBuild()
	fakeAgent.Remove()
	fig.report(os.Stdout, code)
	if path := os.Getenv("QD_FAULTS_FIGURES"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			fig.report(f, code)
			f.Close()
		}
	}
	os.Exit(code)
}

// rng returns a random source for one scenario, derived from the run's
// seed and the scenario's name so that -seed replays every scenario.
func rng(t *testing.T) *rand.Rand {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(t.Name()) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(seed, h))
}

// poll calls sample over and over in a goroutine of its own, waiting every
// between calls (not at all when zero), until stop is called; stop returns
// once the last call has.
func poll(every time.Duration, sample func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			sample()
			select {
			case <-done:
				return
			case <-time.After(every):
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// fakeAgent is built without the race detector: dozens of copies run at
// once.
var fakeAgent = &testkit.Binary{Pkg: "github.com/qd-run/qd/faults/fakeagent"}
