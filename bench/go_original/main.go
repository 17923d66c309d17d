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

// clone copies a model deep enough for merge.Desired, which deletes the acknowledged sensors
// from the maps it is given.
func clone(d Device) Device {
	out := make(Device, len(d))
	for group, sensors := range d {
		copied := make(map[string]Sensor, len(sensors))
		for name, s := range sensors {
			copied[name] = s
		}
		out[group] = copied
	}
	return out
}

// sink keeps the timed copies on the heap, as the copies given to merge.Desired are.
var sink Device

func count(d Device) (n int) {
	for _, sensors := range d {
		n += len(sensors)
	}
	return n
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
		report1 := func(pending Device) Device {
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
			left, err := merge.Desired(ctx, merged, pending, merge.DesiredOptions{})
			if err != nil {
				panic(err)
			}
			return left
		}
		if left := report1(clone(desired)); count(left) >= count(desired) {
			panic("the report acknowledged nothing")
		}
		// Each report gets its own copy of the desired model; the copies are timed apart and
		// taken off.
		result := testing.Benchmark(func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				report1(clone(desired))
			}
		})
		copies := testing.Benchmark(func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sink = clone(desired)
			}
		})
		fmt.Printf("%s %d\n", leaves, result.NsPerOp()-copies.NsPerOp())
	}
}
