package tray

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// The D-Bus tests run the tray as a child process (fyne.io/systray keeps
// one tray per process): the test binary itself, told by
// WIRELANE_TRAY_TEST_SOCKET to be a tray for that socket.
func TestMain(m *testing.M) {
	if sock := os.Getenv("WIRELANE_TRAY_TEST_SOCKET"); sock != "" {
		os.Exit(child(sock))
	}
	os.Exit(m.Run())
}

func child(sock string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	retry, _ := time.ParseDuration(os.Getenv("WIRELANE_TRAY_TEST_RETRY"))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	err := Run(ctx, Config{Socket: sock, Zenity: os.Getenv("WIRELANE_TRAY_TEST_ZENITY"), Logger: log, Retry: retry, Options: &Options{Root: true}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tray:", err)
		return 1
	}
	return 0
}
