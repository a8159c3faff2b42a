package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// fanoutClientH2 is fanoutClient on a bare HTTP/2 connection: one goroutine reads frames, decodes each
// response (proto.Unmarshal of the whole DeltaDiscoveryResponse, as a grpc-go client does) and writes its
// ACK, and the ACKs of the responses read together go out in one write. A grpc-go client hands every
// message between three goroutines (the transport's reader, the stream's Recv, the loopy writer) and, with
// 10,000 of them on the runner's one core, took longer per response than lbplane did to send it: the row
// measured the clients (bench/results/2026-11-23-vm-incremental section 6.4). What lbplane sees on the wire
// is the same: one connection and one ADS stream per client, its requests, and an ACK per response.
func fanoutClientH2(ctx context.Context, addr string, node *corev3.Node, types []string, got func(typ int)) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	br, bw := bufio.NewReaderSize(conn, 32<<10), bufio.NewWriterSize(conn, 4<<10)
	fr := http2.NewFramer(bw, br)
	fr.MaxHeaderListSize = 1 << 20
	if _, err := bw.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	// Large windows, as the grpc-go client had (static 1 MiB) and more: the client never has to wait for
	// window updates of its own; it still returns what it reads (below).
	const window = 1 << 30
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window},
		http2.Setting{ID: http2.SettingEnablePush, Val: 0}); err != nil {
		return err
	}
	if err := fr.WriteWindowUpdate(0, window-65535); err != nil {
		return err
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", addr},
		{":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return err
		}
	}
	const sid = 1
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	var out []byte
	send := func(req *discovery.DeltaDiscoveryRequest) error {
		out = out[:0]
		out = append(out, 0, 0, 0, 0, 0)
		out, err = proto.MarshalOptions{}.MarshalAppend(out, req)
		if err != nil {
			return err
		}
		binary.BigEndian.PutUint32(out[1:5], uint32(len(out)-5))
		return fr.WriteData(sid, false, out)
	}
	for i, typ := range types {
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}}
		if i == 0 {
			req.Node = node
		}
		if err := send(req); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	var msg []byte  // the gRPC messages read and not yet decoded
	unreturned := 0 // bytes read and not yet given back in a window update
	for {
		// Everything read so far is answered: write it before waiting for more.
		if br.Buffered() == 0 && bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame, *http2.RSTStreamFrame:
			return fmt.Errorf("stream ended: %v", f)
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				return fmt.Errorf("stream ended by the server")
			}
		case *http2.DataFrame:
			msg = append(msg, f.Data()...)
			if unreturned += int(f.Length); unreturned > window/2 {
				if err := fr.WriteWindowUpdate(0, uint32(unreturned)); err != nil {
					return err
				}
				err, unreturned = fr.WriteWindowUpdate(sid, uint32(unreturned)), 0
			}
			for err == nil && len(msg) >= 5 {
				n := int(binary.BigEndian.Uint32(msg[1:5]))
				if len(msg) < 5+n {
					break
				}
				resp := &discovery.DeltaDiscoveryResponse{}
				if err = proto.Unmarshal(msg[5:5+n], resp); err != nil {
					return err
				}
				msg = msg[5+n:]
				if len(resp.GetResources()) > 0 || len(resp.GetRemovedResources()) > 0 {
					if i := slices.Index(types, resp.GetTypeUrl()); i >= 0 {
						got(i)
					}
				}
				err = send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
			}
			if len(msg) == 0 && cap(msg) > 64<<10 {
				msg = nil // a large first response is not kept for the rest of the run
			}
		}
		if err != nil {
			return err
		}
	}
}
