package murmur2

import "testing"

// The vectors Kafka's own UtilsTest uses for murmur2.
func TestHash(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := Hash([]byte(tc.key)); got != tc.want {
			t.Errorf("murmur2(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

// The partitions Kafka's DefaultPartitioner gives, computed by hand from the vectors
// above as (vector & 0x7fffffff) % partitions, not by the code under test.
func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		key        string
		partitions int32
		want       int32
	}{
		{"foobar", 3, 0},                    // (-790332482 & 0x7fffffff) = 1357151166; % 3 = 0
		{"foobar", 12, 6},                   // 1357151166 % 12 = 6
		{"foobar", 8, 6},                    // 1357151166 % 8 = 6
		{"21", 4, 0},                        // 1173551340 % 4 = 0
		{"abc", 7, 4},                       // 479470107 % 7 = 4
		{"a-little-bit-long-string", 10, 2}, // 1161502112 % 10 = 2
		{"abc", 1, 0},
	} {
		if got := Partition([]byte(tc.key), tc.partitions); got != tc.want {
			t.Errorf("Partition(%q, %d) = %d, want %d", tc.key, tc.partitions, got, tc.want)
		}
	}
}

// An empty key is a key: Kafka hashes it (only a null key is sticky).
func TestEmptyKey(t *testing.T) {
	// The empty-array vector of Kafka's UtilsTest.
	if got := Hash([]byte{}); got != 275646681 {
		t.Errorf("murmur2(empty) = %d, want 275646681", got)
	}
}
