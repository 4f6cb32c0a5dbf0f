package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/arbiterhq/arbiter/internal/sim"
)

// The public traces are not in the repository: scripts/fetch-traces.sh
// downloads them. These name the folders in errors.
const (
	openbFolder    = "the folder of the openb trace (scripts/fetch-traces.sh DIR downloads it into DIR/alibaba-gpu-v2023)"
	expectedFolder = "the folder of the FGD paper's results (scripts/fetch-traces.sh DIR downloads them into DIR/fgd-expected-results)"
	traceDirUsage  = "folder of the openb trace, instead of the scenario's trace.dir"
)

// noTrace explains an error opening a trace file that is not there: how
// says which flag or setting names its folder. Other errors come back as
// they are.
func noTrace(err error, how string) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("%w: %s", err, how)
}

// loadScenario reads a scenario (the embedded one for ""), replaces its
// trace folder with traceDir when given, and checks that the trace files
// are there before any run starts.
func loadScenario(path, traceDir string) (*sim.Scenario, error) {
	sc, err := sim.LoadScenario(path)
	if err != nil {
		return nil, err
	}
	if sc.Trace == nil {
		if traceDir != "" {
			return nil, fmt.Errorf("sim: --trace-dir: scenario %s replays no trace", sc.Name)
		}
		return sc, nil
	}
	if traceDir != "" {
		sc.Trace.Dir = traceDir
	}
	for _, f := range sc.Trace.Files() {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("sim: scenario %s: %w", sc.Name, noTrace(err, "pass --trace-dir or set trace.dir in the scenario to "+openbFolder))
		}
	}
	return sc, nil
}
