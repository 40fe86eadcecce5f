package storecore

import (
	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Push subscriptions and their deliveries are not events: both stores keep
// them in two tables (push_subscriptions, push_deliveries), and only the
// SQL's placeholders and who writes it differ.

// PushCapKeySQL is agentbridge.PushCapKey of a push_subscriptions row.
const PushCapKeySQL = `CASE WHEN token_id <> '' THEN 'token:' || token_id ELSE 'device:' || device END`

// PushDeliveryColumns are the columns ScanPushDelivery reads, in order;
// PushDeliveryValues gives an insert device_key and then them.
const PushDeliveryColumns = "endpoint, token_id, device, thread, event, category, outcome, status, at, latency_ms"

// PushDeliveriesSelect lists the kept deliveries, newest first.
const PushDeliveriesSelect = `SELECT ` + PushDeliveryColumns + ` FROM push_deliveries ORDER BY seq DESC`

// PushDeliveryValues are d's device key and PushDeliveryColumns' values.
func PushDeliveryValues(d agentbridge.PushDelivery) []any {
	return []any{d.DeviceKey(), d.Endpoint, d.TokenID, d.Device, d.Thread, d.Event, d.Category, d.Outcome, d.Status, d.At, d.LatencyMS}
}

// ScanPushDelivery scans a PushDeliveryColumns row.
func ScanPushDelivery(r Row) (agentbridge.PushDelivery, error) {
	var d agentbridge.PushDelivery
	err := r.Scan(&d.Endpoint, &d.TokenID, &d.Device, &d.Thread, &d.Event, &d.Category, &d.Outcome, &d.Status, &d.At, &d.LatencyMS)
	return d, err
}
