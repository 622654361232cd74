import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config/env.js';
import { AesGcmCodec } from './codec.js';
import { clientInterceptors, type Tracing } from '../ops/tracing.js';

export function dataConverter(config: Pick<Config, 'payloadKey'>) {
  return { payloadCodecs: [new AesGcmCodec(config.payloadKey)] };
}

export async function connectTemporal(
  config: Pick<Config, 'temporal' | 'payloadKey'>,
  tracing: Tracing | null = null,
): Promise<{ client: Client; connection: Connection }> {
  const connection = await Connection.connect({ address: config.temporal.address });
  const interceptors = clientInterceptors(tracing);
  const client = new Client({
    connection,
    namespace: config.temporal.namespace,
    dataConverter: dataConverter(config),
    ...(interceptors ? { interceptors } : {}),
  });
  return { client, connection };
}
