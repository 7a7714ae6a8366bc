package gateway

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Resolve turns a command-line argument into a gateway file path. An
// argument without a '/' and without the ".toml" suffix that is a valid
// interface name means ConfigDir/NAME.toml; anything else is a path.
// isName reports the first case.
func Resolve(arg string) (path string, isName bool) {
	if !strings.Contains(arg, "/") && !strings.HasSuffix(arg, ".toml") && wgquick.ValidInterfaceName(arg) {
		return filepath.Join(ConfigDir, arg+".toml"), true
	}
	return arg, false
}

// LoadFile reads and parses the gateway file at path (at most
// MaxFileSize bytes). It does not read key files; see LoadKeys.
func LoadFile(path string) (*Gateway, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, missingFile(path)
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes; this is not a gateway file", path, MaxFileSize)
	}
	return Parse(path, b)
}

// missingFile is the error for a gateway file that does not exist; it
// matches fs.ErrNotExist.
type missingFile string

func (m missingFile) Error() string        { return fmt.Sprintf("`%s' does not exist", string(m)) }
func (m missingFile) Is(target error) bool { return target == fs.ErrNotExist }

// LoadKeys reads the private and preshared key files the gateway names and
// checks their permissions: a key file others may write is refused (they
// could swap the key), one they may read gets a warning. It returns the
// warnings, one line each. Errors are positioned at the key file setting.
func (g *Gateway) LoadKeys() (warnings []string, err error) {
	var errs ErrorList
	load := func(path string, pos Pos, key, what string) *wgquick.Key {
		k, warn, err := readKeyFile(path, what)
		if warn != "" {
			warnings = append(warnings, warn)
		}
		if err != nil {
			errs = append(errs, &Error{File: g.Path, Pos: pos, Key: key, Msg: err.Error()})
			return nil
		}
		return k
	}
	if g.PrivateKeyFile != "" {
		if k := load(g.PrivateKeyFile, g.privateKeyFilePos, "interface.private_key_file", "private key"); k != nil {
			g.PrivateKey = k
		}
	}
	for i := range g.Sites {
		s := &g.Sites[i]
		if s.PresharedKeyFile != "" {
			if k := load(s.PresharedKeyFile, s.presharedKeyFilePos, "site["+strconv.Itoa(i)+"].preshared_key_file", "preshared key"); k != nil {
				s.PresharedKey = k
			}
		}
	}
	if g.PrivateKey != nil && g.PrivateKeyFile != "" {
		for _, i := range g.ownKeySites() {
			errs = append(errs, &Error{File: g.Path, Pos: g.Sites[i].publicKeyPos, Key: "site[" + strconv.Itoa(i) + "].public_key", Msg: ownKeyMsg(&g.Sites[i])})
		}
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return warnings, errs
	}
	return warnings, nil
}

// readKeyFile reads one base64 key from a file of at most a few lines.
func readKeyFile(path, what string) (*wgquick.Key, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("%s file: %v", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s file %s is not a regular file", what, path)
	}
	warn := ""
	switch perm := fi.Mode().Perm(); {
	case perm&0o022 != 0:
		return nil, "", fmt.Errorf("%s file %s is writable by others (mode %04o); run chmod 600 on it", what, path, perm)
	case perm&0o044 != 0:
		warn = fmt.Sprintf("Warning: %s file %s is readable by others (mode %04o); it should be 0600", what, path, perm)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, warn, fmt.Errorf("%s file: %v", what, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, warn, fmt.Errorf("%s file %s: %v", what, path, err)
	}
	k, err := wgquick.ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, warn, fmt.Errorf("%s file %s does not hold a key (want one line of 44 characters of base64, as `wirelane genkey` prints)", what, path)
	}
	return &k, warn, nil
}
