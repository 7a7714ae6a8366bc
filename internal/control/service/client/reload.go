package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/wirelane/wirelane/internal/control/service"
)

// Reload changes a running tunnel into what its file says, in place
// (dry: only returns the plan).
func (c *Client) Reload(ctx context.Context, name string, dry bool) (service.ReloadResult, error) {
	var res service.ReloadResult
	return res, c.do(ctx, http.MethodPost, "/v1/tunnels/"+url.PathEscape(name)+"/reload", service.ReloadRequest{DryRun: dry}, &res)
}
