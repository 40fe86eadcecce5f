package main

import (
	"context"
	"errors"
)

func (m *Main) runService(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runBackup(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runRestore(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

func (m *Main) runDoctor(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
