package service

import (
	"errors"
	"fmt"
	"net/http"
)

// Errors a Host wraps to tell the API which HTTP status applies.
var (
	ErrNotFound    = errors.New("no such tunnel")
	ErrExists      = errors.New("a tunnel of that name already exists")
	ErrBusy        = errors.New("the tunnel is not down")
	ErrInvalid     = errors.New("invalid request")
	ErrUnsupported = errors.New("not supported by this service")
)

// ConfigError is a configuration that does not validate: the file, the
// 1-based line (0 when the problem is not on one line) and the message,
// which never repeats key material.
type ConfigError struct {
	File string
	Line int
	Msg  string
}

// Error returns "FILE:LINE: message" (or "FILE: message").
func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// apiError is the JSON body of every error answer.
type apiError struct {
	Error string `json:"error"`
	Line  int    `json:"line,omitempty"`
}

// statusOf maps a Host's error to its HTTP status and body.
func statusOf(err error) (int, apiError) {
	var ce *ConfigError
	switch {
	case errors.As(err, &ce):
		return http.StatusBadRequest, apiError{Error: ce.Error(), Line: ce.Line}
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, apiError{Error: err.Error()}
	case errors.Is(err, ErrExists), errors.Is(err, ErrBusy):
		return http.StatusConflict, apiError{Error: err.Error()}
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, apiError{Error: err.Error()}
	case errors.Is(err, ErrUnsupported):
		return http.StatusNotImplemented, apiError{Error: err.Error()}
	}
	return http.StatusInternalServerError, apiError{Error: err.Error()}
}
