// The Go original's side of bench/go_compare.sh: one report in memory as godeviceshadow runs
// it on the fixtures of make_fixtures.py (parse the report into the typed model, merge it into
// the stored reported state with a change logger, acknowledge the desired state), timed with
// testing.Benchmark. Prints "LEAVES NS_PER_OP" for each size. bench/go_compare.sh builds it
// against a checkout of godeviceshadow (go.mod's require is replaced by the checkout's path) and
// runs it as
//
//	go_report FIXTURES_DIR
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mariotoffia/godeviceshadow/loggers/changelogger"
	"github.com/mariotoffia/godeviceshadow/merge"
)

// Sensor is a timestamped value, as godeviceshadow's models declare them.
type Sensor struct {
	Value float64   `json:"value"`
	TS    time.Time `json:"ts"`
}

func (s Sensor) GetTimestamp() time.Time { return s.TS }
func (s Sensor) GetValue() any           { return s.Value }

// Device is the fixtures' shape: components of sensors.
type Device map[string]map[string]Sensor

func load(dir, name string) Device {
	text, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		panic(err)
	}
	var d Device
	if err := json.Unmarshal(text, &d); err != nil {
		panic(err)
	}
	return d
}

func main() {
	ctx := context.Background()
	for _, leaves := range []string{"10", "100", "1000"} {
		dir := filepath.Join(os.Args[1], leaves)
		reported, desired := load(dir, "reported"), load(dir, "desired")
		report, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			panic(err)
		}
		result := testing.Benchmark(func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var incoming Device
				if err := json.Unmarshal(report, &incoming); err != nil {
					panic(err)
				}
				merged, err := merge.Merge(ctx, reported, incoming, merge.MergeOptions{
					Mode:    merge.ServerIsMaster, // a report leaves the sensors it does not name
					Loggers: merge.MergeLoggers{changelogger.New()},
				})
				if err != nil {
					panic(err)
				}
				if _, err := merge.Desired(ctx, merged, desired, merge.DesiredOptions{}); err != nil {
					panic(err)
				}
			}
		})
		fmt.Printf("%s %d\n", leaves, result.NsPerOp())
	}
}
