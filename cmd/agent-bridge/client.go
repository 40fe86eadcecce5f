package main

import (
	"context"
	"errors"
)

func (m *Main) runThread(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runPost(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runInvite(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runState(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runTail(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
