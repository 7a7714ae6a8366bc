package control

import "testing"

// auth-token and auth-token-user (base64) as OpenVPN pushes them; a
// malformed auth-token-user fails the push.
func TestPushReplyAuthToken(t *testing.T) {
	r, err := ParsePushOptions([]string{"auth-token SESS_ID_AT_abc==", "auth-token-user Ym9i"})
	if err != nil || r.AuthToken != "SESS_ID_AT_abc==" || r.AuthTokenUser != "bob" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"auth-token-user", "auth-token-user !!", "auth-token-user a b"} {
		if _, err := ParsePushOptions([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
