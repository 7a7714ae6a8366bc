package ovpntunnel

// Asking for auth-user-pass credentials (and a static-challenge response)
// on the terminal, as openvpn does when the file names no credentials:
// the username and an echoed response are read as typed, the password
// (and a response with echo 0) with the terminal's echo off, restored
// afterwards and on Ctrl-C.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/ovpn/config"
)

// stdin is where credentials are read from; tests replace it.
var stdin = os.Stdin

// errNotTerminal is returned when credentials would have to be typed but
// standard input is not a terminal.
var errNotTerminal = errors.New("standard input is not a terminal")

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// credentialPrompt reads answers from a terminal; prompts go to out.
type credentialPrompt struct {
	tty *os.File
	r   *bufio.Reader // over tty; one for all answers so none is lost
	out io.Writer
}

func newCredentialPrompt(tty *os.File, out io.Writer) (*credentialPrompt, error) {
	if !isTerminal(tty) {
		return nil, errNotTerminal
	}
	return &credentialPrompt{tty: tty, r: bufio.NewReader(tty), out: out}, nil
}

// ask prints prompt and reads one line, with the terminal's echo off
// unless echo is set.
func (p *credentialPrompt) ask(prompt string, echo bool) (string, error) {
	fmt.Fprint(p.out, prompt)
	if !echo {
		restore, err := p.echoOff()
		if err != nil {
			return "", err
		}
		defer restore()
	}
	line, err := p.r.ReadString('\n')
	if !echo {
		fmt.Fprintln(p.out) // the newline the user typed was not echoed
	}
	if err != nil && line == "" {
		if err == io.EOF {
			return "", errors.New("no answer (end of input)")
		}
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// echoOff turns the terminal's echo off until restore is called; a
// signal that ends the program meanwhile restores it first.
func (p *credentialPrompt) echoOff() (restore func(), err error) {
	fd := int(p.tty.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, err
	}
	sigs := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		select {
		case sig := <-sigs:
			_ = unix.IoctlSetTermios(fd, unix.TCSETS, old)
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		_ = unix.IoctlSetTermios(fd, unix.TCSETS, old)
	}, nil
}

// CredentialRequest is what an OpenVPN client tunnel asks its user for
// before it goes on: on the terminal (PromptCredentials), or through
// ConnectOptions.Credentials (the service's auth event).
type CredentialRequest struct {
	// Password asks for the auth-user-pass password, and for the
	// username too unless Username is set.
	Password bool
	// Username is the username the file gives without a password
	// (config.Config.AsksPassword): only the password is asked for, as
	// OpenVPN 2.6 prompts for it, and the username stays the file's.
	Username string
	// Challenge, when not "", asks for a response with this text: a
	// static or dynamic challenge, or the private key's passphrase.
	Challenge string
	// Echo tells whether the response may be shown as typed.
	Echo bool
}

// promptCredentials asks on tty for what r wants: the username (unless
// r gives it) and password when r.Password is set, and the challenge
// response when r.Challenge is not "". user is r.Username when r gives
// it.
func promptCredentials(tty *os.File, out io.Writer, r CredentialRequest) (user, pass, response string, err error) {
	p, err := newCredentialPrompt(tty, out)
	if err != nil {
		return "", "", "", err
	}
	if r.Password {
		user = r.Username
		if user == "" {
			if user, err = p.ask("Enter Auth Username: ", true); err != nil {
				return "", "", "", err
			}
			if user == "" {
				return "", "", "", errors.New("empty username")
			}
		}
		if pass, err = p.ask("Enter Auth Password: ", false); err != nil {
			return "", "", "", err
		}
	}
	if r.Challenge != "" {
		if response, err = p.ask("CHALLENGE: "+r.Challenge+" ", r.Echo); err != nil {
			return "", "", "", err
		}
	}
	return user, pass, response, nil
}

// ErrNotTerminal is PromptCredentials' error when standard input is not a
// terminal.
var ErrNotTerminal = errNotTerminal

// PromptCredentials asks on the terminal (standard input; prompts on
// standard error) for what an OpenVPN tunnel needs, as connect does: the
// username (unless r gives it) and password when r.Password, the
// challenge response when r.Challenge is not "". The CLI uses it to
// answer a service's auth event.
func PromptCredentials(r CredentialRequest) (user, pass, response string, err error) {
	return promptCredentials(stdin, stderr, r)
}

// unlockKey asks on the terminal for the passphrase of an encrypted
// private key or PKCS#12 file that askpass did not unlock, as OpenVPN
// does ("Enter Private Key Password:"). It returns an exit status: 0
// unlocked (or nothing to unlock), 1 a wrong passphrase, 2 no terminal.
func unlockKey(cmd, file string, c *config.Common) int {
	return unlockKeyWith(cmd, file, c, nil)
}

// unlockKeyWith is unlockKey asking ask instead of the terminal when it is
// set (ConnectOptions.Credentials: the service's auth event, with the
// prompt as the challenge text and the answer as the response).
func unlockKeyWith(cmd, file string, c *config.Common, ask func(CredentialRequest) (string, string, string, error)) int {
	if !c.KeyLocked() {
		return 0
	}
	if ask != nil {
		_, _, pass, err := ask(CredentialRequest{Challenge: "Enter Private Key Password:"})
		if err == nil {
			err = c.Unlock(pass)
		}
		if err != nil {
			fmt.Fprintf(stderr, "wirelane ovpn %s: %s: private key: %v\n", cmd, file, err)
			return 1
		}
		return 0
	}
	p, err := newCredentialPrompt(stdin, stderr)
	if errors.Is(err, errNotTerminal) {
		fmt.Fprintf(stderr, "wirelane ovpn %s: %s: the private key is encrypted: add `askpass FILE` (a file with the passphrase) or run on a terminal to type it\n", cmd, file)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn %s: %v\n", cmd, err)
		return 1
	}
	pass, err := p.ask("Enter Private Key Password: ", false)
	if err == nil {
		err = c.Unlock(pass)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn %s: %s: private key: %v\n", cmd, file, err)
		return 1
	}
	return 0
}
