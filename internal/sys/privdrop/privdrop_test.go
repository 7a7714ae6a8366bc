package privdrop

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/cap"
)

func TestLookupUnknown(t *testing.T) {
	if _, err := Lookup("no-such-user-privdrop", ""); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), `user "no-such-user-privdrop"`) {
		t.Errorf("unknown user: %v", err)
	}
	if _, err := Lookup("", "no-such-group-privdrop"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), `group "no-such-group-privdrop"`) {
		t.Errorf("unknown group: %v", err)
	}
	tg, err := Lookup("", "")
	if err != nil || !tg.Empty() {
		t.Errorf("nothing given: %+v, %v", tg, err)
	}
}

// A user alone takes its primary group; a group overrides it.
func TestLookupPrimaryGroup(t *testing.T) {
	tg, err := Lookup("root", "")
	if err != nil || tg.UID != 0 || tg.GID != 0 {
		t.Fatalf("root: %+v, %v", tg, err)
	}
	if _, err := Lookup("nobody", "nogroup"); err != nil {
		t.Skipf("no nobody/nogroup here: %v", err)
	}
	tg, _ = Lookup("nobody", "nogroup")
	if tg.UID != 65534 || tg.GID != 65534 || tg.String() != "user nobody (65534), group nogroup (65534)" {
		t.Errorf("nobody/nogroup: %+v %q", tg, tg.String())
	}
}

// dropChild is the re-executed test binary: it starts threads, drops to
// nobody keeping CAP_NET_ADMIN, and prints every thread's status lines.
const dropChild = "PRIVDROP_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(dropChild) == "" {
		os.Exit(m.Run())
	}
	// Threads that exist before the drop must change too.
	var wg sync.WaitGroup
	hold := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			runtime.LockOSThread()
			wg.Done()
			<-hold
		}()
	}
	wg.Wait()
	tg, err := Lookup("nobody", "nogroup")
	if err == nil {
		err = tg.Drop(cap.NET_ADMIN)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	fmt.Printf("dumpable %d\n", d)
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, p := range tasks {
		b, _ := os.ReadFile(p)
		for _, l := range strings.Split(string(b), "\n") {
			for _, k := range []string{"Uid:", "Gid:", "Groups:", "CapEff:", "CapPrm:", "CapInh:", "CapAmb:"} {
				if strings.HasPrefix(l, k) {
					fmt.Println(strings.Join(strings.Fields(l), " "))
				}
			}
		}
	}
	close(hold)
	os.Exit(0)
}

// Drop changes every thread: uid and gid nobody's, the one group
// nogroup, CAP_NET_ADMIN alone effective and permitted, not dumpable
// (with fs.suid_dumpable at 0 or not, the flag is set again).
func TestDropEveryThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (setuid)")
	}
	if _, err := Lookup("nobody", "nogroup"); err != nil {
		t.Skipf("no nobody/nogroup here: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dropChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[0] != "dumpable 0" {
		t.Errorf("after the drop: %s", lines[0])
	}
	want := map[string]string{"Uid:": "Uid: 65534 65534 65534 65534", "Gid:": "Gid: 65534 65534 65534 65534",
		"Groups:": "Groups: 65534", "CapEff:": "CapEff: 0000000000001000", "CapPrm:": "CapPrm: 0000000000001000",
		"CapInh:": "CapInh: 0000000000000000", "CapAmb:": "CapAmb: 0000000000000000"}
	threads := 0
	for _, l := range lines[1:] {
		k := strings.Fields(l)[0]
		if k == "Uid:" {
			threads++
		}
		if l != want[k] {
			t.Errorf("a thread has %q, want %q", l, want[k])
		}
	}
	if threads < 5 {
		t.Errorf("%d threads seen, want at least 5\n%s", threads, out)
	}
}
