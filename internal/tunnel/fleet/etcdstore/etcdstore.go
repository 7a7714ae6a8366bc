// Package etcdstore is the fleet's store on an etcd cluster
// (go.etcd.io/etcd/client/v3, a v3.5 client: it speaks to etcd 3.4, as
// Debian bookworm ships, up to 3.6). Client TLS is required: whoever can
// write the fleet's prefix decides who joins the mesh.
package etcdstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
)

// Config says where the cluster is and how to prove who we are.
type Config struct {
	// Endpoints are the members' client URLs (https://host:2379).
	Endpoints []string
	// CAFile verifies the members; CertFile and KeyFile are this
	// gateway's client certificate (PEM).
	CAFile, CertFile, KeyFile string
	// DialTimeout bounds the first connection (default 5 s); the client
	// does not wait for it: New returns at once and calls fail until a
	// member answers.
	DialTimeout time.Duration
}

// Store is a store.Store on etcd.
type Store struct {
	c *clientv3.Client
}

var _ store.Store = (*Store)(nil)

// TLSConfig reads the CA, certificate and key files.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate %s and key %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("etcd CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("etcd CA file %s holds no PEM certificate", caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// New connects to the cluster (without waiting for it).
func New(cfg Config) (*Store, error) {
	tc, err := TLSConfig(cfg.CAFile, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	dt := cfg.DialTimeout
	if dt == 0 {
		dt = 5 * time.Second
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		TLS:                  tc,
		DialTimeout:          dt,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		AutoSyncInterval:     0,
		Logger:               zap.NewNop(),
		RejectOldCluster:     false,
		PermitWithoutStream:  true,
		// gRPC's own reconnection backoff grows to two minutes while the
		// members are down; a gateway that came back that late would find
		// its lease expired and its site would flap in every other
		// gateway. Retry at least every second instead.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &Store{c: c}, nil
}

func kvOf(k *mvccpb.KeyValue) store.KV {
	return store.KV{Key: string(k.Key), Value: k.Value, CreateRev: k.CreateRevision, ModRev: k.ModRevision, Lease: store.LeaseID(k.Lease)}
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.KV, bool, error) {
	r, err := s.c.Get(ctx, key)
	if err != nil {
		return store.KV{}, false, err
	}
	if len(r.Kvs) == 0 {
		return store.KV{}, false, nil
	}
	return kvOf(r.Kvs[0]), true, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]store.KV, int64, error) {
	r, err := s.c.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	out := make([]store.KV, len(r.Kvs))
	for i, kv := range r.Kvs {
		out[i] = kvOf(kv)
	}
	return out, r.Header.Revision, nil
}

// Grant implements store.Store (etcd leases are whole seconds).
func (s *Store) Grant(ctx context.Context, ttl time.Duration) (store.LeaseID, error) {
	sec := int64((ttl + time.Second - 1) / time.Second)
	r, err := s.c.Grant(ctx, sec)
	if err != nil {
		return 0, err
	}
	return store.LeaseID(r.ID), nil
}

// KeepAlive implements store.Store.
func (s *Store) KeepAlive(ctx context.Context, id store.LeaseID) error {
	_, err := s.c.KeepAliveOnce(ctx, clientv3.LeaseID(id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return store.ErrNoLease
	}
	return err
}

// Revoke implements store.Store.
func (s *Store) Revoke(ctx context.Context, id store.LeaseID) error {
	_, err := s.c.Revoke(ctx, clientv3.LeaseID(id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}

// Put implements store.Store, in a transaction when cond is not Always.
func (s *Store) Put(ctx context.Context, key string, value []byte, lease store.LeaseID, cond store.Cond) error {
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(clientv3.LeaseID(lease)))
	}
	put := clientv3.OpPut(key, string(value), opts...)
	var err error
	if cond == store.Always {
		_, err = s.c.Do(ctx, put)
	} else {
		var cmp clientv3.Cmp
		if cond == store.IfAbsent {
			cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		} else {
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", int64(cond))
		}
		var r *clientv3.TxnResponse
		r, err = s.c.Txn(ctx).If(cmp).Then(put).Commit()
		if err == nil && !r.Succeeded {
			return store.ErrFailed
		}
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return store.ErrNoLease
	}
	return err
}

// Watch implements store.Store. The watch requires a leader, so that a
// member cut off from the others ends it instead of staying silent.
func (s *Store) Watch(ctx context.Context, prefix string, rev int64) <-chan store.WatchResponse {
	out := make(chan store.WatchResponse, 16)
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wc := s.c.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV())
	go func() {
		defer close(out)
		defer cancel()
		for r := range wc {
			if r.CompactRevision != 0 {
				out <- store.WatchResponse{Err: store.ErrCompacted, Rev: r.CompactRevision}
				return
			}
			if err := r.Err(); err != nil {
				out <- store.WatchResponse{Err: err, Rev: r.Header.Revision}
				return
			}
			wr := store.WatchResponse{Rev: r.Header.Revision}
			for _, e := range r.Events {
				ev := store.Event{Type: store.Put, KV: kvOf(e.Kv)}
				if e.Type == clientv3.EventTypeDelete {
					ev.Type = store.Delete
				}
				wr.Events = append(wr.Events, ev)
			}
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() == nil {
			out <- store.WatchResponse{Err: errors.New("the watch ended")}
		}
	}()
	return out
}

// Close implements store.Store.
func (s *Store) Close() error { return s.c.Close() }
