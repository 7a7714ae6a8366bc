package netcfg

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// rtTablesFiles are read in order; a later file can add names.
var rtTablesFiles = []string{"/usr/share/iproute2/rt_tables", "/etc/iproute2/rt_tables"}

// ResolveTable turns a Table value (a number or a name from
// iproute2's rt_tables files) into a table number.
func ResolveTable(s string) (int, error) {
	if n, err := strconv.ParseUint(s, 0, 32); err == nil {
		if n == 0 {
			return 0, fmt.Errorf("table 0 is not a usable routing table")
		}
		return int(n), nil
	}
	names := map[string]int{"default": 253, "main": 254, "local": 255}
	for _, f := range rtTablesFiles {
		readRTTables(f, names)
		// rt_tables.d drop-ins.
		if ents, err := os.ReadDir(f + ".d"); err == nil {
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".conf") {
					readRTTables(f+".d/"+e.Name(), names)
				}
			}
		}
	}
	if n, ok := names[s]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("routing table %q is not a number and not named in /etc/iproute2/rt_tables", s)
}

// readRTTables adds the table names of the rt_tables file at path to
// names; a missing or unreadable file adds nothing.
func readRTTables(path string, names map[string]int) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	parseRTTables(f, names)
}

// parseRTTables adds the "NUMBER NAME" lines of an rt_tables file to
// names. Comments ('#') and lines that are not of that form are skipped,
// as iproute2 does; a line longer than the scanner's limit ends the file.
func parseRTTables(r io.Reader, names map[string]int) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		if n, err := strconv.ParseUint(fs[0], 0, 32); err == nil {
			names[fs[1]] = int(n)
		}
	}
}
