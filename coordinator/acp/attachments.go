package acp

import (
	"encoding/base64"
	"log/slog"
	"net/url"
	"os"
	"slices"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agent-bridge/agent-bridge/adapters"
)

// maxImageBlock is the largest image sent inline as an image block; a
// larger one goes as a resource link (model APIs refuse images much
// larger: Anthropic's limit is 5 MB).
const maxImageBlock = 5 << 20

// imageBlockTypes are the image types sent as image blocks: those the
// vendors' models read. Any other image is a resource link.
var imageBlockTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// promptBlocks is a turn's prompt: the rendered text, then one block per
// file of the events the text renders (a resumed session's: those since
// its last turn) that this run has a copy of: an image block for an image
// when the agent declared promptCapabilities.image, else a resource link
// to the copy (file://), which the agent may read with its own tools.
func promptBlocks(text string, payload adapters.Payload, fresh, images bool, log *slog.Logger) []sdk.ContentBlock {
	blocks := []sdk.ContentBlock{sdk.TextBlock(text)}
	var only []string // the events rendered, when not all of them
	if !fresh && len(payload.SinceLastTurn) > 0 {
		for _, e := range payload.SinceLastTurn {
			only = append(only, e.ID)
		}
	}
	for _, f := range payload.Attachments {
		if f.Path == "" || (only != nil && !slices.Contains(only, f.Event)) {
			continue
		}
		if images && slices.Contains(imageBlockTypes, f.Type) && f.Size <= maxImageBlock {
			data, err := os.ReadFile(f.Path)
			if err == nil {
				blocks = append(blocks, sdk.ImageBlock(base64.StdEncoding.EncodeToString(data), f.Type))
				continue
			}
			log.Warn("read an attachment's copy for an image block; sending a link", "path", f.Path, "err", err)
		}
		link := sdk.ResourceLinkBlock(f.Name, (&url.URL{Scheme: "file", Path: f.Path}).String())
		mime, size := f.Type, int(f.Size)
		link.ResourceLink.MimeType, link.ResourceLink.Size = &mime, &size
		blocks = append(blocks, link)
	}
	return blocks
}
