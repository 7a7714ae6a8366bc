package tray

import (
	"context"
	"strings"

	"github.com/wirelane/wirelane/internal/control/service"
)

// AskCredentials asks the user, with zenity, for what an auth event of
// tunnel wants: a username and password, or the password alone when the
// prompt gives the username (and the static challenge's
// response when the prompt has one), or a challenge's response. Nothing
// is stored: the answer goes to the caller only. ErrCancelled when the
// user closed a dialog.
func (d *Dialogs) AskCredentials(ctx context.Context, tunnel string, p service.AuthPrompt) (service.AuthAnswer, error) {
	title := "--title=Wirelane: " + Clip(tunnel, 40)
	var a service.AuthAnswer
	switch {
	case p.Kind != "challenge" && p.Username != "":
		// The file gives the username: the password only.
		out, err := d.run(ctx, "--password", title+" ("+Clip(p.Username, 40)+")")
		if err != nil {
			return a, err
		}
		a.Username, a.Password = p.Username, strings.TrimSuffix(strings.TrimSuffix(out, "\n"), "\r")
		if p.Prompt == "" {
			return a, nil
		}
	case p.Kind != "challenge":
		out, err := d.run(ctx, "--password", "--username", title)
		if err != nil {
			return a, err
		}
		a.Username, a.Password = ParsePasswordDialog(out)
		if p.Prompt == "" {
			return a, nil
		}
	}
	text := p.Prompt
	if text == "" {
		text = "The server asks for a response."
	}
	args := []string{"--entry", title, "--text=" + Clip(text, 300)}
	if !p.Echo {
		args = append(args, "--hide-text")
	}
	out, err := d.run(ctx, args...)
	if err != nil {
		return a, err
	}
	a.Response = strings.TrimRight(out, "\r\n")
	return a, nil
}

// ParsePasswordDialog reads what `zenity --password --username` prints:
// "USERNAME|PASSWORD" and a newline. The username ends at the first "|"
// (a password may hold one); without a "|" the whole line is the password.
func ParsePasswordDialog(out string) (username, password string) {
	out = strings.TrimSuffix(strings.TrimSuffix(out, "\n"), "\r")
	user, pass, ok := strings.Cut(out, "|")
	if !ok {
		return "", out
	}
	return user, pass
}
