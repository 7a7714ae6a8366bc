package client

// auth-token: a server (OpenVPN's auth-gen-token, Access Server, many
// providers) pushes a token after the password was accepted, and expects
// it instead of the password on every later key exchange: renegotiations
// of the session and the sessions of a reconnect. The token lives in
// memory only (an AuthToken shared by the Dials of one tunnel), is sent
// as the password with the configured username (or the pushed
// auth-token-user), and is forgotten when the server refuses it, after
// which the password (if still known) is used again.
//
//	PUSH_REPLY,auth-token T[,auth-token-user B64] -> AuthToken.set
//	PUSH_REPLY,auth-token T' (a renewal, mid-session) -> AuthToken.set
//	key_method_2 (Hello): token held? username, T : username, password
//	AUTH_FAILED while a token was sent -> AuthToken.Forget
//	    Dial: the same remote again at once with the password
//	    mid-session: ErrTokenRejected (a restart, not an exit)

import (
	"errors"
	"sync"
)

// ErrTokenRejected ends a session whose renegotiation the server refused
// while the client authenticated with an auth-token (it expired, or the
// server restarted): unlike ErrAuthFailed it calls for a reconnect, which
// authenticates with the password again.
var ErrTokenRejected = errors.New("client: the server refused the auth-token")

// AuthToken holds the auth-token a server pushed, for the key exchanges
// after the first: a caller that dials again after a session ended (a
// reconnect) passes the same AuthToken in Options so the new session
// uses the token too. The zero value holds no token. Safe for
// concurrent use.
type AuthToken struct {
	mu    sync.Mutex // guards the fields below
	token string     // "" = none
	user  string     // auth-token-user, "" = the configured username
}

// Held reports whether a token is held.
func (a *AuthToken) Held() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token != ""
}

// Forget drops the token (and its user).
func (a *AuthToken) Forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token, a.user = "", ""
}

// get returns the token and the username to send with it (user when no
// auth-token-user was pushed); ok is false without a token.
func (a *AuthToken) get(user string) (string, string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" {
		return "", "", false
	}
	if a.user != "" {
		user = a.user
	}
	return user, a.token, true
}

// set keeps a pushed token; user is a pushed auth-token-user ("" keeps
// the one held, if any, for a renewal that repeats only the token).
func (a *AuthToken) set(token, user string) {
	if token == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = token
	if user != "" {
		a.user = user
	}
}
