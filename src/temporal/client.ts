import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config.js';
import { AesGcmCodec } from './codec.js';

export function dataConverter(config: Pick<Config, 'payloadKey'>) {
  return { payloadCodecs: [new AesGcmCodec(config.payloadKey)] };
}

export async function connectTemporal(config: Pick<Config, 'temporal' | 'payloadKey'>): Promise<{ client: Client; connection: Connection }> {
  const connection = await Connection.connect({ address: config.temporal.address });
  const client = new Client({ connection, namespace: config.temporal.namespace, dataConverter: dataConverter(config) });
  return { client, connection };
}
