package coordinator

import "context"

// uploadDiff stores a change's unified diff as an attachment of thread
// (contract 8.2) and returns its id.
func (c *Coordinator) uploadDiff(ctx context.Context, thread, name string, body []byte) (string, error) {
	return "", nil
}
