output "node_policy_arn" {
  description = "ARN of the policy for writer and reader nodes (put and get)."
  value       = aws_iam_policy.node.arn
}

output "compactor_policy_arn" {
  description = "ARN of the policy for the compactor (put, get, list and delete)."
  value       = aws_iam_policy.compactor.arn
}

output "node_policy_json" {
  description = "The node policy document."
  value       = data.aws_iam_policy_document.node.json
}

output "compactor_policy_json" {
  description = "The compactor policy document."
  value       = data.aws_iam_policy_document.compactor.json
}
