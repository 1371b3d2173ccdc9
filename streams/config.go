package streams

// Commit limits: a commit is one request, which the server bounds (10,000 records and a
// 16 MiB body by default, and one flush of 8 MiB).
const (
	DefaultMaxCommitRecords = 5000
	DefaultMaxCommitBytes   = 4 << 20
)
