package v1

// ScramCredential is one SCRAM credential as the server describes it: its mechanism
// and iteration count (never a salt, a key or the password).
type ScramCredential struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

// ScramUser is a user's SCRAM credentials; its principal is User: and the user.
type ScramUser struct {
	User        string            `json:"user"`
	Principal   string            `json:"principal"`
	Credentials []ScramCredential `json:"credentials"`
}

// ScramUserList answers GET /v1/scram-credentials.
type ScramUserList struct {
	Users []ScramUser `json:"users"`
}

// SetScramCredentialRequest is PUT /v1/scram-credentials/{user}: the server draws the
// salt and keeps only the keys derived from the salted password.
type SetScramCredentialRequest struct {
	// Mechanism is SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `json:"mechanism"`
	Password  string `json:"password"`
	// Iterations, 4096 to 16384; default 8192.
	Iterations int32 `json:"iterations,omitempty"`
}
