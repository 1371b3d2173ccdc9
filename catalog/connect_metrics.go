package catalog

import "fmt"

// ValidateTaskMetrics accepts what a task may report as its metrics: "" (none) or a
// JSON object within MaxTaskMetrics bytes.
func ValidateTaskMetrics(m string) error {
	if m == "" {
		return nil
	}
	if len(m) > MaxTaskMetrics {
		return fmt.Errorf("%w: task metrics of %d bytes: at most %d", ErrInvalidConnector, len(m), MaxTaskMetrics)
	}
	if _, err := CanonicalJSONObject([]byte(m)); err != nil {
		return fmt.Errorf("%w: task metrics are not a JSON object: %v", ErrInvalidConnector, err)
	}
	return nil
}
