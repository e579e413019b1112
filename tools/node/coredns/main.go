// Command coredns is CoreDNS with only the plugins the real test node needs: cluster names from the API
// server (kubernetes), the address to listen on (bind), and cache, errors, log and ready. Without `forward`
// (and the cloud and etcd back ends) it cannot send a query off the machine: a name outside the cluster is
// REFUSED, never answered from upstream. Fewer plugins also build in a fraction of the time.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
