package wgquick

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Resolve turns a command-line argument into a configuration file path and
// an interface name, as wg-quick does: a bare interface name means
// ConfigDir/NAME.conf; anything else is a path whose base name (minus
// ".conf") names the interface.
func Resolve(arg string) (path, ifname string, err error) {
	path = arg
	if ValidInterfaceName(arg) {
		path = filepath.Join(ConfigDir, arg+".conf")
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("`%s' does not exist", path)
		}
		return "", "", err
	}
	m := confRE.FindStringSubmatch(path)
	if m == nil {
		return "", "", fmt.Errorf("the config file must be a valid interface name, followed by .conf: `%s'", path)
	}
	return path, m[2], nil
}

// LoadFile resolves arg, reads and parses the file. Errors in the file come
// back as *ParseError (FILE:LINE: message).
func LoadFile(arg string) (*Config, error) {
	path, name, err := Resolve(arg)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(path, b)
	if err != nil {
		return nil, err
	}
	c.Name = name
	return c, nil
}

// WorldAccessible reports whether the file or its directory grants any
// permission to others (wg-quick warns about that: the file holds a
// private key).
func WorldAccessible(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return false
	}
	return fi.Mode().Perm()&di.Mode().Perm()&0o007 != 0
}
