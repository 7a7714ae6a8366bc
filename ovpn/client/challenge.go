package client

// Dynamic challenge/response (CRV1), as OpenVPN's servers and plugins
// ask it: the first attempt fails with
//
//	AUTH_FAILED,CRV1:FLAGS:STATE_ID:BASE64(USERNAME):CHALLENGE TEXT
//
// (FLAGS: R a response is required, E it may be echoed), and the caller
// dials again with the username it names and the password
// CRV1::STATE_ID::RESPONSE (ChallengeError.Answer).

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ChallengeError is an AUTH_FAILED that carries a dynamic challenge;
// errors.Is(err, ErrAuthFailed) holds.
type ChallengeError struct {
	// Echo says the response may be shown as it is typed; Required that
	// one is needed (the R flag).
	Echo, Required bool
	// StateID is the server's name for the authentication in progress.
	StateID string
	// Username is the username to send with the answer.
	Username string
	// Text is the challenge to show.
	Text string
}

// Error describes the challenge.
func (e *ChallengeError) Error() string {
	return fmt.Sprintf("client: the server asks a challenge (CRV1): %s", e.Text)
}

// Unwrap makes a ChallengeError an ErrAuthFailed.
func (e *ChallengeError) Unwrap() error { return ErrAuthFailed }

// Answer returns the username and password that answer the challenge.
func (e *ChallengeError) Answer(response string) (user, pass string) {
	return e.Username, "CRV1::" + e.StateID + "::" + response
}

// parseCRV1 reads the reason of an AUTH_FAILED ("CRV1:..."); ok is false
// for any other reason.
func parseCRV1(reason string) (*ChallengeError, bool, error) {
	rest, ok := strings.CutPrefix(reason, "CRV1:")
	if !ok {
		return nil, false, nil
	}
	parts := strings.SplitN(rest, ":", 4)
	if len(parts) != 4 {
		return nil, true, errors.New("client: malformed CRV1 challenge")
	}
	user, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, true, errors.New("client: malformed CRV1 challenge (username not base64)")
	}
	e := &ChallengeError{StateID: parts[1], Username: string(user), Text: strings.TrimSpace(parts[3])}
	for _, f := range strings.Split(parts[0], ",") {
		switch f {
		case "E":
			e.Echo = true
		case "R":
			e.Required = true
		}
	}
	return e, true, nil
}
