package main

import (
	"context"
	"errors"
)

func (m *Main) runCoordinator(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runUp(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runInvocations(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runWhy(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
