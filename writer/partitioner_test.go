package writer

import "testing"

// The vectors Kafka's own UtilsTest uses for murmur2.
func TestMurmur2(t *testing.T) {
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
		if got := murmur2([]byte(tc.key)); got != tc.want {
			t.Errorf("murmur2(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

// The partitions Kafka's DefaultPartitioner gives, computed by hand from the vectors
// above as (vector & 0x7fffffff) % partitions, not by the code under test.
func TestKeyPartition(t *testing.T) {
	for _, tc := range []struct {
		key        string
		partitions int32
		want       int32
	}{
		{"foobar", 3, 0},                    // (-790332482 & 0x7fffffff) = 1357151166; % 3 = 0
		{"foobar", 12, 6},                   // 1357151166 % 12 = 6
		{"21", 4, 0},                        // 1173551340 % 4 = 0
		{"abc", 7, 4},                       // 479470107 % 7 = 4
		{"a-little-bit-long-string", 10, 2}, // 1161502112 % 10 = 2
		{"abc", 1, 0},
	} {
		if got := keyPartition([]byte(tc.key), tc.partitions); got != tc.want {
			t.Errorf("keyPartition(%q, %d) = %d, want %d", tc.key, tc.partitions, got, tc.want)
		}
	}
}

// An empty key is a key: Kafka hashes it (only a null key is sticky).
func TestKeyPartitionEmptyKey(t *testing.T) {
	// The empty-array vector of Kafka's UtilsTest.
	if got := murmur2([]byte{}); got != 275646681 {
		t.Errorf("murmur2(empty) = %d, want 275646681", got)
	}
}
