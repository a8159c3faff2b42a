// Package grpcfleet is what the proxyless gRPC tests and the gRPC fleet benchmark share: gRPC backends that
// answer with their name, grpc-go xDS clients (xds:///target) made from the bootstrap
// `lbctl bootstrap --grpc` writes, each its own xDS node, and the driver of the fleet process
// (internal/grpcfleet/fleet) with its answers.
package grpcfleet

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/xds"
)

// Backend is a gRPC server on loopback whose UnaryCall answers with its name.
type Backend struct {
	Name string
	Port int
	srv  *grpc.Server
}

type namedServer struct {
	testgrpc.UnimplementedTestServiceServer
	name string
}

func (s *namedServer) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Hostname: s.name}, nil
}

// StartBackend serves on a port of 127.0.0.1 the system chose, until Stop.
func StartBackend(name string) (*Backend, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &namedServer{name: name})
	go srv.Serve(lis)
	return &Backend{Name: name, Port: lis.Addr().(*net.TCPAddr).Port, srv: srv}, nil
}

// Stop closes the listener and every connection at once, as a killed process would.
func (b *Backend) Stop() { b.srv.Stop() }

// Client is one xDS node's channel to xds:///target.
type Client struct {
	testgrpc.TestServiceClient
	cc *grpc.ClientConn
}

// NewClient dials xds:///target with its own xDS client, configured by bootstrap (the JSON of
// `lbctl bootstrap --grpc`), and starts resolving at once.
func NewClient(bootstrap []byte, target string) (*Client, error) {
	r, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		return nil, fmt.Errorf("the bootstrap: %w", err)
	}
	cc, err := grpc.NewClient("xds:///"+target, grpc.WithResolvers(r), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	cc.Connect()
	return &Client{TestServiceClient: testgrpc.NewTestServiceClient(cc), cc: cc}, nil
}

// Close ends the channel and its xDS stream.
func (c *Client) Close() error { return c.cc.Close() }

// Call makes one RPC (with metadata x-user: user when user is set) and returns the name of the backend that
// answered.
func Call(c testgrpc.TestServiceClient, user string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if user != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-user", user)
	}
	r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	return r.GetHostname(), err
}
