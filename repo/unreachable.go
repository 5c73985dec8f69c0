package repo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrUnreachable marks a root whose storage could not be reached; the
// models of the other roots are unaffected.
var ErrUnreachable = errors.New("repository unreachable")

// unreachable stands for a root that failed to open. Every use retries
// the open, at most once per backoff period (doubling up to a minute), and
// once it succeeds the root behaves like any other.
type unreachable struct {
	root string
	open func(ctx context.Context) (Source, error)

	mu      sync.Mutex
	src     Source
	err     error
	next    time.Time
	backoff time.Duration
}

func (u *unreachable) String() string { return u.root }

// get returns the opened source, trying again if the backoff has passed.
func (u *unreachable) get(ctx context.Context) (Source, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.src != nil {
		return u.src, nil
	}
	if now := time.Now(); now.After(u.next) {
		src, err := u.open(ctx)
		if err == nil {
			u.src = src
			return src, nil
		}
		u.err = err
		u.backoff = min(max(2*u.backoff, time.Second), time.Minute)
		u.next = now.Add(u.backoff)
	}
	return nil, fmt.Errorf("%w: %s (retrying every %v at most): %w", ErrUnreachable, u.root, u.backoff, u.err)
}

func (u *unreachable) Models(ctx context.Context) ([]string, error) {
	src, err := u.get(ctx)
	if err != nil {
		return nil, err
	}
	return src.Models(ctx)
}

func (u *unreachable) Localize(ctx context.Context, model string) (string, error) {
	src, err := u.get(ctx)
	if err != nil {
		return "", err
	}
	return src.Localize(ctx, model)
}

func (u *unreachable) Fingerprint(ctx context.Context, model string) (string, error) {
	src, err := u.get(ctx)
	if err != nil {
		return "", err
	}
	return src.Fingerprint(ctx, model)
}

// LocalizeVersions forwards to a remote root once it is open.
func (u *unreachable) LocalizeVersions(ctx context.Context, model string, versions []int64) error {
	src, err := u.get(ctx)
	if err != nil {
		return err
	}
	if vl, ok := src.(VersionLocalizer); ok {
		return vl.LocalizeVersions(ctx, model, versions)
	}
	return nil
}
