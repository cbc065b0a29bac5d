import { Loaded } from '../components/loaded';
import { Money } from '../components/money';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { tiers } from './billing/tiers';

/**
 * What a request costs in this workspace: the service tiers' prices, and each model of the
 * catalog by region with the price billed for it (the provider's plus the plan's markup).
 * Prices are per million tokens, exact.
 */
export function ModelsPage() {
  const { client, workspace } = useSignedIn();
  const prices = useLoad(() => client.get('/v1/billing/prices'), [client]);
  return (
    <Page title="Models">
      <p>
        The models {workspace.name}'s keys can ask for, and their prices per million tokens on its current plan. Send <code>service/fast</code> or{' '}
        <code>service/balanced</code> to let the service pick the model, or a model's id.
      </p>
      <Loaded state={prices} what="Loading the prices">
        {(list) => {
          const models = [...list.models].sort((a, b) => a.region.localeCompare(b.region) || a.id.localeCompare(b.id));
          return (
            <>
              <Section title="Service tiers">
                <table className="data-table">
                  <thead>
                    <tr>
                      <th scope="col">Tier</th>
                      <th scope="col">Input, per 1M tokens</th>
                      <th scope="col">Output, per 1M tokens</th>
                    </tr>
                  </thead>
                  <tbody>
                    {list.tiers.map((tier) => {
                      const known = tiers.find((candidate) => candidate.key === tier.tier);
                      return (
                        <tr key={tier.tier}>
                          <th scope="row">
                            <code>service/{tier.tier}</code>
                            {known && <div className="muted small">{known.label}</div>}
                          </th>
                          <td>
                            <Money amount={tier.input_usd_per_1m} />
                          </td>
                          <td>
                            <Money amount={tier.output_usd_per_1m} />
                          </td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </Section>
              <Section title="Models by region">
                <table className="data-table">
                  <thead>
                    <tr>
                      <th scope="col">Model</th>
                      <th scope="col">Region</th>
                      <th scope="col">Serves tiers</th>
                      <th scope="col">Input, per 1M tokens</th>
                      <th scope="col">Output, per 1M tokens</th>
                    </tr>
                  </thead>
                  <tbody>
                    {models.map((model) => (
                      <tr key={`${model.region}/${model.id}`}>
                        <th scope="row">
                          <code>{model.id}</code>
                        </th>
                        <td>{model.region}</td>
                        <td>{model.tiers.length > 0 ? model.tiers.join(', ') : <span className="muted">passthrough only</span>}</td>
                        <td>
                          <Money amount={model.input_usd_per_1m} />
                        </td>
                        <td>
                          <Money amount={model.output_usd_per_1m} />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </Section>
              <p className="muted">
                Price list version <code>{list.version}</code>.
              </p>
            </>
          );
        }}
      </Loaded>
    </Page>
  );
}
