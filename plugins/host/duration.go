package host

import (
	"encoding/json"
	"time"
)

// Duration is a time.Duration that reports (plugin vet and plugin test
// print them as JSON) render in human units, "1.234ms", rather than as a
// count of nanoseconds.
type Duration time.Duration

// MarshalJSON writes the duration as time.Duration's String form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads the String form back.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// String is time.Duration's.
func (d Duration) String() string { return time.Duration(d).String() }
